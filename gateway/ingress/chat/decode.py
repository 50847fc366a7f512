"""Decode an OpenAI Chat Completions request into the canonical Request."""

from __future__ import annotations

import dataclasses
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any, NoReturn

import orjson
from pydantic import ValidationError

from gateway.ingress.budget import KnownList
from gateway.ingress.chat import wire as w
from gateway.ingress.chat.plain import assistant_end, plain, plain_message, tool_call
from gateway.ingress.chat.typed import TYPED, typed_head, typed_message, typed_messages
from gateway.ingress.chat.validation import narrowed, validated
from gateway.ingress.echo_formats import thinking_blocks, tool_call_signature
from gateway.ingress.errors import ClientError, invalid, json_path
from gateway.ingress.memo import Items, fresh_items
from gateway.ingress.tool_lists import ToolLists
from gateway.repair.holds import plain_holds
from gateway.transcript.model import (
    Block,
    CacheControl,
    Image,
    Message,
    Reasoning,
    Request,
    ResponseFormat,
    Role,
    Text,
    ToolCall,
    ToolChoice,
    ToolChoiceMode,
    ToolResult,
    ToolSpec,
    replace,
)
from gateway.transcript.resume import MIN_MESSAGES, Resumable
from gateway.transcript.seal import Sealer


class DecodeStats:
    """What decoding noticed beyond the transcript: unparseable echoed tokens (counted)."""

    __slots__ = ("ignored_tokens",)

    def __init__(self) -> None:
        self.ignored_tokens = 0


def include_usage(body: Any) -> bool:
    """`stream_options.include_usage` of a request `decode_request` accepted."""
    options = body.get("stream_options")
    return isinstance(options, dict) and options.get("include_usage") is True


def decode_request(
    body: Any, sealer: Sealer, stats: DecodeStats | None = None, items: Items[Decoded] | None = None
) -> Request:
    """`items`: what `DecodeMemo.items` found of `body["messages"]` (decoding within an exchange);
    without it every message is decoded."""
    if not isinstance(body, dict):
        raise invalid("request body must be a JSON object", code="invalid_type")
    raw_messages = body.get("messages")
    if type(raw_messages) is not list or not raw_messages:
        _whole_validation_error(body)
    if items is None:
        if len(raw_messages) < MIN_MESSAGES:
            return _short(body, raw_messages, sealer, stats or DecodeStats())
        items = fresh_items(len(raw_messages))
    found_all = items.found
    if len(found_all) != len(raw_messages):
        raise ValueError("the memo's items are not the body's messages")
    # a fold over the decoded items: resumed after those the conversation's last turn decoded
    # (the memo hands back the same objects for them, none of them new: gateway/transcript/resume.py)
    start, held = _DECODED.find(found_all, None)  # type: ignore[arg-type]
    try:
        wire = typed_head(body) or w.ChatRequestHead.model_validate(body)
        tools = _tools(body.get("tools"))
        # only new messages are validated: a found one passed when it was first seen, one read
        # into its Struct (gateway/ingress/chat/typed.py) when it was parsed
        # a long transcript at first sight: every message read into its Struct, none found
        all_typed = not start and _all_typed(raw_messages) and found_all.count(None) == len(found_all)
        if not all_typed:
            new = zip(islice(raw_messages, start, None), islice(found_all, start, None), strict=True)
            wires = [
                (m if type(m) in _TYPED_KINDS or plain(m) else validated(m)) if found is None else None
                for m, found in new
            ]
    except ValidationError:
        _whole_validation_error(items.whole(body))
    if wire.n not in (None, 1):
        raise invalid("only n=1 is supported", param="n", code="unsupported_value")
    _refuse_unsupported(body)
    stats = stats or DecodeStats()

    if held is None:
        system: list[Text] = []
        messages: list[Message] = []
        ignored_before = 0
    else:
        system, messages, ignored_before = [*held[0]], [*held[1]], held[2]
    found: tuple[bool, bool, bool, bool] | None = None  # what repair acts on, read on the way
    if all_typed:
        decoded: list[Decoded] = []
        try:
            found = typed_messages(raw_messages, 0, sealer, decoded)
        finally:  # those decoded before one that raised are kept, as `decode_each` keeps them
            items.kept(0, decoded)
    else:
        # a found item is its decoded value (what `items.decode` would hand back, without a call)
        decoded = items.decode_each(start, wires, _decode_message, sealer)
    ignored_total = ignored_before + sum(map(_IGNORED, decoded))
    new_messages = list(map(_MESSAGE, decoded))
    system_role, leading = Role.SYSTEM, 0
    if not messages:  # the instructions that open the conversation
        for message in new_messages:
            if message.role is not system_role:
                break
            system.extend(message.blocks)  # type: ignore[arg-type]
            leading += 1
    rest = new_messages[leading:] if leading else new_messages
    if system_role in map(_ROLE, rest):
        # instructions given later in the conversation stay where they are (with their blocks)
        messages.extend(m for m in rest if m.role is not system_role or m.blocks)
    else:
        messages.extend(rest)
    stats.ignored_tokens += ignored_total  # counted once the messages decoded (an error drops the stats)
    kept = tuple(messages)
    _DECODED.hold((*found_all[:start], *decoded), None, (tuple(system), kept, ignored_total))  # type: ignore[arg-type]
    if found is not None:
        plain_holds(kept, *found)
    return _request(wire, tools, tuple(system), kept)


def _short(body: dict[str, Any], raw_messages: list[Any], sealer: Sealer, stats: DecodeStats) -> Request:
    """`decode_request` of a body whose items the memo does not see (a short body: the bench's
    small request, a one-shot question) and too few for the fold to resume (`_DECODED` neither
    finds nor holds them): the same checks in the same order and the same result, without the
    memo's per-item bookkeeping (`fresh_items`, `Items.decode_each`: about a third of a
    one-message decode). tests/ingress/test_chat_short.py compares both."""
    try:
        wire = typed_head(body) or w.ChatRequestHead.model_validate(body)
        tools = _tools(body.get("tools"))
        wires = [m if type(m) in _TYPED_KINDS or plain(m) else validated(m) for m in raw_messages]
    except ValidationError:
        _whole_validation_error(body)
    if wire.n not in (None, 1):
        raise invalid("only n=1 is supported", param="n", code="unsupported_value")
    _refuse_unsupported(body)
    decoded = [_decode_message(m, index, sealer) for index, m in enumerate(wires)]
    system: list[Text] = []
    leading, system_role = 0, Role.SYSTEM
    for message, _ in decoded:  # the instructions that open the conversation
        if message.role is not system_role:
            break
        system.extend(message.blocks)  # type: ignore[arg-type]
        leading += 1
    rest = [message for message, _ in islice(decoded, leading, None)]
    if system_role in map(_ROLE, rest):  # later instructions stay where they are (with their blocks)
        rest = [m for m in rest if m.role is not system_role or m.blocks]
    stats.ignored_tokens += sum(map(_IGNORED, decoded))
    return _request(wire, tools, tuple(system), tuple(rest))


def _request(
    wire: Any, tools: tuple[ToolSpec, ...], system: tuple[Text, ...], messages: tuple[Message, ...]
) -> Request:
    """The request of a decoded head (`wire`: typed.py `Head` or `wire.ChatRequestHead`), tools
    and messages, once the tool names and the tool choice are checked."""
    names = {t.name for t in tools}
    if len(names) != len(tools):
        raise invalid("tool names must be unique", param="tools", code="invalid_value")

    choice: ToolChoice | None = None
    if isinstance(wire.tool_choice, str):
        choice = ToolChoice(ToolChoiceMode(wire.tool_choice))
    elif wire.tool_choice is not None:
        name = wire.tool_choice.function.name
        if name not in names:
            raise invalid(
                f"tool_choice names unknown tool {name!r}",
                param="tool_choice.function.name",
                code="invalid_value",
            )
        choice = ToolChoice(ToolChoiceMode.TOOL, name)
    if (
        choice is not None
        and choice.mode is not ToolChoiceMode.NONE
        and not tools
        and choice.mode is not ToolChoiceMode.AUTO
    ):
        raise invalid("tool_choice requires tools", param="tool_choice", code="invalid_value")

    stop = wire.stop
    return Request(
        model=wire.model,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=wire.parallel_tool_calls,
        stream=wire.stream,
        max_tokens=wire.max_completion_tokens or wire.max_tokens,
        temperature=wire.temperature,
        top_p=wire.top_p,
        stop=(stop,) if isinstance(stop, str) else tuple(stop or ()),
        reasoning_effort=wire.reasoning_effort,
        response_format=_response_format(wire.response_format),
    )


def _tools(raw: Any) -> tuple[ToolSpec, ...]:
    """The request's `tools` decoded (raises pydantic's ValidationError): a list seen before by
    its text (`KnownList`: a body read in parts) or its values (`ToolLists`)."""
    kind = type(raw)
    if kind is KnownList:
        return raw.value  # type: ignore[no-any-return]
    if kind is list:
        return _TOOL_LISTS.decoded(raw)
    # none declared (absent or null: what the validator makes of them) or not a list
    return () if raw is None else _tool_specs(raw)


def _tool_specs(raw: Any) -> tuple[ToolSpec, ...]:
    """The request's `tools` validated and decoded (raises pydantic's ValidationError)."""
    return tuple(
        ToolSpec(
            t.function.name,
            t.function.description or "",
            t.function.parameters or {"type": "object", "properties": {}},
            cache=_cache(t.cache_control),
        )
        for t in w.TOOLS.validate_python(raw) or ()
    )


_TOOL_LISTS = ToolLists(_tool_specs)
# the codec's typed reading: its messages' Structs, and its tools found by their text
TYPED_WITH_TOOLS = dataclasses.replace(TYPED, tools=_TOOL_LISTS)
# the decoded messages' fold (system instructions, messages, ignored tokens) per conversation
_DECODED = Resumable()


# a message decoded: the canonical message (a system one with the blocks it contributes, maybe
# none) and the echoed continuity tokens it carried that did not parse
Decoded = tuple[Message, int]


_TYPED_KINDS = TYPED.kinds
_MESSAGE, _IGNORED, _ROLE = itemgetter(0), itemgetter(1), attrgetter("role")


def _all_typed(raw_messages: list[Any]) -> bool:
    """Whether every message was read into its Struct (a long transcript's at first sight)."""
    return set(map(type, raw_messages)) <= _TYPED_KINDS


def _decode_message(msg: Any, index: int, sealer: Sealer) -> Decoded:
    """Message `index` decoded: read into its Struct (typed.py) or not (`_message`)."""
    if type(msg) in _TYPED_KINDS:
        return typed_message(msg, index, sealer)
    return _message(msg, index, sealer)


def _message(msg: Any, index: int, sealer: Sealer) -> Decoded:
    """Message `index`, not read into its Struct (those go to typed.py `typed_message`)."""
    where = f"messages[{index}]"
    if type(msg) is dict:  # a plain shape, not validated: it would pass (plain.py)
        return plain_message(msg, where, sealer)
    if isinstance(msg, w.SystemMessage):
        return Message(Role.SYSTEM, _system_blocks(msg, f"{where}.content")), 0
    if isinstance(msg, w.UserMessage):
        blocks = _user_blocks(msg.content, f"{where}.content")
        return Message(Role.USER, _cache_last(blocks, msg.cache_control)), 0
    if isinstance(msg, w.AssistantMessage):
        return _assistant(msg, where, sealer)
    if isinstance(msg, w.ToolMessage):
        text, images, cache = _tool_content(msg.content, f"{where}.content")
        cache = _cache(msg.cache_control) or cache
        return Message(Role.TOOL, (ToolResult(msg.tool_call_id, text, False, images, cache),)), 0
    raise invalid("unsupported message role", param=f"{where}.role")  # pragma: no cover - a closed union


def _whole_validation_error(body: dict[str, Any]) -> NoReturn:
    """Raise the first error of the whole request, as OpenAI orders them (model, messages, the
    rest): the head and the messages are validated apart, so either may have failed first."""
    tools = body.get("tools")
    if type(tools) is KnownList:  # left unparsed (`_tools`), valid: the whole body's error is elsewhere
        body = {**body, "tools": orjson.loads(tools.text)}
    try:
        # the same first error as the whole body's, from bounded work (a long body's in one
        # pydantic call held the GIL ~0.6 s); should the cut pass, the whole decides
        w.ChatCompletionRequest.model_validate(narrowed(body))
        w.ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        path = json_path(_field_loc(first["loc"]))
        raise invalid(first["msg"], param=path or None, code=_error_code(first["type"])) from None
    raise AssertionError("a part of the request failed validation that the whole passes")  # pragma: no cover


def _response_format(wire: w.ResponseFormatWire | None) -> ResponseFormat | None:
    if wire is None or isinstance(wire, w.ResponseFormatText):
        return None
    if isinstance(wire, w.ResponseFormatJsonObject):
        return ResponseFormat("json_object")
    spec = wire.json_schema
    if spec.schema_ is None:  # a name without a schema asks for any JSON object
        return ResponseFormat("json_object", spec.name, None, spec.strict, spec.description or "")
    return ResponseFormat("json_schema", spec.name, spec.schema_, spec.strict, spec.description or "")


def _cache(wire: w.CacheControlWire | None) -> CacheControl | None:
    return CacheControl(wire.ttl) if wire is not None else None


def _cache_last(blocks: tuple[Block, ...], wire: w.CacheControlWire | None) -> tuple[Block, ...]:
    """A message-level `cache_control` (LiteLLM's convention) marks the message's last block."""
    if wire is None or not blocks:
        return blocks
    return (*blocks[:-1], replace(blocks[-1], cache=_cache(wire)))


# Parameters the gateway cannot honour on every provider: refused by name instead of silently
# ignored, so a client never gets something other than what it asked for. (name, value accepted
# as a no-op, message)
_UNSUPPORTED: tuple[tuple[str, tuple[object, ...], str], ...] = (
    ("functions", (), "legacy `functions` are not supported: send `tools`"),
    ("function_call", (), "legacy `function_call` is not supported: send `tool_choice`"),
    ("logprobs", (False,), "log probabilities are not supported"),
    ("top_logprobs", (0,), "log probabilities are not supported"),
    ("audio", (), "audio output is not supported"),
    ("prediction", (), "predicted outputs are not supported"),
    ("modalities", (["text"],), "only text output is supported"),
)


def _refuse_unsupported(body: dict[str, Any]) -> None:
    for name, accepted, message in _UNSUPPORTED:
        if name in body and body[name] is not None and body[name] not in accepted:
            raise invalid(message, param=name, code="unsupported_parameter")


# pydantic error types -> the `code` OpenAI gives the same mistake
_MISSING_TYPES = frozenset({"missing", "union_tag_not_found"})
_VALUE_TYPES = frozenset(
    {
        "literal_error",
        "union_tag_invalid",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        "too_short",
        "too_long",
        "string_too_short",
        "string_too_long",
        "string_pattern_mismatch",
        "finite_number",
    }
)


def _error_code(error_type: str) -> str:
    if error_type in _MISSING_TYPES:
        return "missing_required_parameter"
    if error_type in _VALUE_TYPES:
        return "invalid_value"
    return "invalid_type"


_ROLE_TAGS = frozenset({"system", "developer", "user", "assistant", "tool"})
_FORMAT_TAGS = frozenset({"text", "json_object", "json_schema"})
_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "none", "dict", "list"})


def _field_loc(loc: tuple) -> list:
    """Pydantic error locations name union branches (the role tag, `str`, `TextPart`...);
    clients want the JSON path of their own field."""
    out: list = []
    for position, part in enumerate(loc):
        if isinstance(part, str):
            if part in _TYPE_NAMES or part[:1].isupper() or "[" in part:
                continue
            if part in _ROLE_TAGS and out and isinstance(out[-1], int) and out[:1] == ["messages"]:
                continue
            if part in _FORMAT_TAGS and position == 1 and out == ["response_format"]:
                continue
        out.append(part)
    return out


def _system_blocks(msg: w.SystemMessage, where: str) -> tuple[Text, ...]:
    """System text in blocks: one per part that carries a cache breakpoint (and the text before
    it), so the breakpoint stays where the client put it; empty text is dropped."""
    content = msg.content
    if isinstance(content, str):
        blocks: tuple[Text, ...] = (Text(content),) if content else ()
        return _cache_last(blocks, msg.cache_control)  # type: ignore[return-value]
    out: list[Text] = []
    pending: list[str] = []
    for j, part in enumerate(content):
        if not isinstance(part, w.TextPart):
            raise invalid(
                f"only text parts are allowed here, got {part.type!r}",
                param=f"{where}[{j}].type",
                code="invalid_value",
            )
        pending.append(part.text)
        if part.cache_control is not None:
            out.append(Text("".join(pending), cache=_cache(part.cache_control)))
            pending = []
    if pending and "".join(pending):
        out.append(Text("".join(pending)))
    return _cache_last(tuple(b for b in out if b.text), msg.cache_control)  # type: ignore[return-value]


def _unsupported_part(kind: str, param: str) -> ClientError:
    return invalid(f"content part type {kind!r} is not supported", param=param, code="unsupported_value")


def _user_blocks(content: str | list, where: str) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (Text(content),)
    blocks: list[Block] = []
    for j, part in enumerate(content):
        if isinstance(part, w.TextPart):
            blocks.append(Text(part.text, cache=_cache(part.cache_control)))
        elif isinstance(part, w.ImagePart):
            blocks.append(Image(part.image_url.url, part.image_url.detail, _cache(part.cache_control)))
        else:
            raise _unsupported_part(part.type, f"{where}[{j}].type")
    return tuple(blocks)


def _tool_content(content: str | list, where: str) -> tuple[str, tuple[Image, ...], CacheControl | None]:
    """A tool message's text, images, and the breakpoint of its parts (a result is one block:
    a breakpoint on any part marks it)."""
    if isinstance(content, str):
        return content, (), None
    texts: list[str] = []
    images: list[Image] = []
    cache: CacheControl | None = None
    for j, part in enumerate(content):
        if isinstance(part, w.TextPart):
            texts.append(part.text)
            cache = _cache(part.cache_control) or cache
        elif isinstance(part, w.ImagePart):
            images.append(Image(part.image_url.url, part.image_url.detail))
            cache = _cache(part.cache_control) or cache
        else:
            raise _unsupported_part(part.type, f"{where}[{j}].type")
    return "".join(texts), tuple(images), cache


def _assistant(msg: w.AssistantMessage, where: str, sealer: Sealer) -> Decoded:
    content = msg.content
    if isinstance(content, list):
        text = "".join(p.text for p in content if isinstance(p, w.TextPart))
    else:
        text = content or ""
    if not text and msg.refusal:  # a refusal sent back is what the model said: plain text
        text = msg.refusal
    bad = 0
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for j, call in enumerate(msg.tool_calls or ()):
        signature, unusable = tool_call_signature(call.model_extra)
        bad += unusable
        function = call.function
        calls.append(tool_call(call.id, function.name, function.arguments, signature, seen, where, j))
    echoed: list[Reasoning] = []
    if msg.thinking_blocks:
        echoed, unusable = thinking_blocks(msg.thinking_blocks)
        bad += unusable
    message, ignored = assistant_end(
        text, content, calls, msg.reasoning_content, msg.reasoning_details, echoed, sealer, where
    )
    return message, ignored + bad
