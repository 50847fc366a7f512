"""Decode an Anthropic Messages request into the canonical Request.

Thinking signatures come back in two forms: the gateway's sealed token (reasoning another provider
issued; forged or edited ones are dropped and counted) or a raw Anthropic signature (issued by an
Anthropic target and handed to the client as is, so the history replays natively; its issuer scope
is unknown, like LiteLLM's echoed thinking_blocks).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson
from pydantic import ValidationError

from gateway.ingress.budget import KnownList
from gateway.ingress.echo_formats import anthropic_redacted, anthropic_thinking
from gateway.ingress.errors import ClientError
from gateway.ingress.memo import Items, fresh_items
from gateway.ingress.messages import wire as w
from gateway.ingress.tool_lists import ToolLists
from gateway.ingress.typed_items import TypedItems
from gateway.transcript.model import (
    ANY_ISSUER,
    Block,
    CacheControl,
    Continuity,
    Document,
    HostedTool,
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
)
from gateway.transcript.resume import Resumable
from gateway.transcript.seal import Sealer
from gateway.wire.anthropic_server import (
    SERVER_TOOL_USE,
    citation,
    is_server_result,
    server_call,
    server_result,
)

ANTHROPIC = "anthropic"
SEALED_PREFIX = "gw1."
# Anthropic's effort levels -> the canonical ones ("max" is the top of the scale)
EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
# request fields only an Anthropic target understands: kept in provider_options["anthropic"]
ANTHROPIC_ONLY = ("metadata", "context_management", "service_tier")
# fields that would make the answer depend on Anthropic-run infrastructure the gateway does not
# route: refused by name instead of ignored
UNSUPPORTED = {
    "mcp_servers": "remote MCP servers (`mcp_servers`) are not supported: give the tools to the client",
    "container": "code-execution containers (`container`) are not supported",
}


def _echoed(data: Mapping[str, Any]) -> Continuity:
    """Server-tool blocks and citations a client echoes: Anthropic issued them, to a scope the
    gateway cannot tell (like raw thinking signatures), so they replay to Anthropic targets."""
    return Continuity("client", ANY_ISSUER, ANTHROPIC, ANY_ISSUER, dict(data))


EMPTY_CONTENT = "all messages must have non-empty content except for the optional final assistant message"


def invalid(message: str, path: str | None = None) -> ClientError:
    return ClientError(400, f"{path}: {message}" if path else message, param=path)


class Decoded:
    """What decoding produced beyond the Request: counted tokens and what the answer needs."""

    __slots__ = ("ignored_tokens", "display_omitted")

    def __init__(self) -> None:
        self.ignored_tokens = 0  # sealed signatures that did not verify (never forwarded)
        self.display_omitted = False  # thinking.display "omitted": reasoning text is not shown


# a message decoded: its role, the canonical messages it makes (a user message's tool results
# and content split apart; a system message's one, maybe without blocks), the echoed tokens that
# did not verify, and whether its content was empty (allowed only for a final assistant message)
MessageDecoded = tuple[str, tuple[Message, ...], int, bool]


@dataclass(frozen=True, slots=True)
class Validated:
    """A request validated: its fields but the messages (`head`), and per message its wire model,
    or None when the memo already knows it (`items.found`)."""

    head: Any  # w.MessagesHead or w.CountTokensHead: a request with `messages` left unvalidated
    messages: list[w.MessageWire | None]
    items: Items[MessageDecoded]
    tools: ToolList


class ToolList:
    """A request's `tools` validated and, once decoded, the specs and hosted tools they make:
    kept together for the next request that sends the same list (gateway/ingress/tool_lists.py)."""

    __slots__ = ("wire", "decoded")

    def __init__(self, wire: list[w.Tool] | None) -> None:
        self.wire = wire
        self.decoded: tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]] | None = None


def _validated_tools(raw: Any) -> ToolList:
    return ToolList(w.TOOLS.validate_python(raw))


_TOOL_LISTS = ToolLists(_validated_tools)
# no typed reading of the messages (parsed by orjson), the tools found by their text
TYPED_TOOLS = TypedItems(None, 0, frozenset(), tools=_TOOL_LISTS)
# the decoded messages' fold (opening system blocks, messages, ignored tokens) per conversation
_DECODED = Resumable()


def validate(
    body: Any, model: type[w.MessagesRequest] = w.MessagesRequest, items: Items[Any] | None = None
) -> Validated:
    """`items`: what `DecodeMemo.items` found of `body["messages"]` (within an exchange)."""
    if not isinstance(body, dict):
        raise invalid("request body must be a JSON object")
    if body.get("thread") is not None:
        raise thread_unsupported()
    raw_messages = body.get("messages")
    if type(raw_messages) is not list or not raw_messages:
        _whole_validation_error(body, model)
    if items is None:
        items = fresh_items(len(raw_messages))
    try:
        head = w.HEADS[model].model_validate(body)
        raw_tools = body.get("tools")
        kind = type(raw_tools)
        if kind is KnownList:  # found by its text (a body read in parts: gateway/ingress/tool_lists.py)
            tools = raw_tools.value
        else:
            tools = _TOOL_LISTS.decoded(raw_tools) if kind is list else _validated_tools(raw_tools)
        # only new messages are validated: a found one passed when it was first seen
        messages = [
            w.MESSAGE.validate_python(m) if found is None else None
            for m, found in zip(raw_messages, items.found, strict=True)
        ]
    except ValidationError:
        _whole_validation_error(items.whole(body), model)
    for name, message in UNSUPPORTED.items():
        if body.get(name) is not None:
            raise ClientError(400, f"{name}: {message}", param=name, code="unsupported_parameter")
    return Validated(head, messages, items, tools)


def _whole_validation_error(body: dict[str, Any], model: type[w.MessagesRequest]) -> NoReturn:
    """Raise the most specific error of the whole request: the head and the messages are
    validated apart, and the error reported is chosen among all of them."""
    tools = body.get("tools")
    if type(tools) is KnownList:  # left unparsed, valid: the whole body's error is elsewhere
        body = {**body, "tools": orjson.loads(tools.text)}
    try:
        model.model_validate(body)
    except ValidationError as exc:
        path, message = w.first_error(exc.errors(include_url=False))
        raise invalid(message, path or None) from None
    raise AssertionError("a part of the request failed validation that the whole passes")  # pragma: no cover


def thread_unsupported() -> ClientError:
    """Message threads (the `thread` field: the server keeps the conversation and a `continue`
    sends only the new messages) are refused by name, never ignored: ignoring one would answer a
    `continue` without its history. The detail is the API's own for a request it cannot thread,
    on which the SDKs' tool runner goes on unthreaded, sending the whole history each turn."""
    return ClientError(
        400,
        "thread: message threads are not supported by this gateway; send the whole conversation "
        "in `messages` (the SDK's thread helpers do with unsupported_request_behavior="
        '"continue_unthreaded")',
        param="thread",
        code="thread_unsupported_request",
        details={"error_code": "thread_unsupported_request", "unsupported": ["thread"]},
    )


def betas(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The `anthropic-beta` flags, from every such header (comma separated), in order."""
    values = headers.getall("anthropic-beta", ()) if hasattr(headers, "getall") else ()
    if not values and headers.get("anthropic-beta"):
        values = (headers["anthropic-beta"],)
    return tuple(dict.fromkeys(b.strip() for v in values for b in v.split(",") if b.strip()))


def decode_request(validated: Validated, headers: Mapping[str, str], sealer: Sealer, out: Decoded) -> Request:
    wire = validated.head
    items = validated.items
    found_all = items.found
    system = _system(wire.system)
    last = len(validated.messages) - 1
    # a fold over the decoded messages, resumed after those the conversation's last turn decoded
    # but its last one (whose emptiness is allowed only as the last message): the memo hands back
    # the same objects for them, none of them new (gateway/transcript/resume.py)
    start, held = _DECODED.find(found_all, None)  # type: ignore[arg-type]
    if held is None:
        opening: list[Block] = []  # the blocks of system messages that open the conversation
        messages: list[Message] = []
        ignored_total = 0
    else:
        opening, messages, ignored_total = [*held[0]], [*held[1]], held[2]
        system.extend(opening)  # type: ignore[arg-type]
        out.ignored_tokens += ignored_total
    decoded_items: list[MessageDecoded] = []
    for i in range(start, last + 1):
        if i == last:
            state = (tuple(opening), tuple(messages), ignored_total)
            _DECODED.hold((*found_all[:start], *decoded_items), None, state)  # type: ignore[arg-type]
        found = found_all[i]
        if found is None:
            message = validated.messages[i]
            found = items.decode(i, lambda: _message(message, f"messages.{i}", sealer))  # noqa: B023
        decoded_items.append(found)
        role, decoded, ignored, empty = found
        if empty and not (i == last and role == "assistant"):
            raise invalid(EMPTY_CONTENT, f"messages.{i}")
        out.ignored_tokens += ignored
        ignored_total += ignored
        if role == "system":
            if not messages:  # instructions that open the conversation
                system.extend(decoded[0].blocks)  # type: ignore[arg-type]
                opening.extend(decoded[0].blocks)
            elif decoded[0].blocks:
                messages.append(decoded[0])
        else:
            messages.extend(decoded)

    listed = validated.tools
    if listed.decoded is None:  # a list seen before was decoded then (a refused one never is)
        listed.decoded = _tools(listed.wire)
    tools, hosted = listed.decoded
    choice, parallel = _tool_choice(wire, {t.name for t in tools}, listed.wire)
    thinking, budget = _thinking(wire.thinking)
    if wire.thinking is not None and getattr(wire.thinking, "display", None) == "omitted":
        out.display_omitted = True
    output = wire.output_config
    effort = output.effort if output is not None else None
    fmt = output.format if output is not None else None
    return Request(
        model=wire.model,
        messages=tuple(messages),
        system=tuple(system),
        tools=tools,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        stream=wire.stream,
        max_tokens=wire.max_tokens,
        temperature=wire.temperature,
        top_p=wire.top_p,
        top_k=wire.top_k,
        stop=tuple(wire.stop_sequences or ()),
        reasoning_effort=EFFORTS[effort] if effort else None,
        response_format=ResponseFormat("json_schema", schema=fmt.schema_) if fmt is not None else None,
        thinking=thinking,
        thinking_budget=budget,
        thinking_default=False,  # the Messages API thinks only when asked to
        hosted_tools=hosted,
        provider_options=_anthropic_options(wire, headers, out),
    )


def _message(message: Any, where: str, sealer: Sealer) -> MessageDecoded:
    role = message.role
    empty = not message.content
    if empty:  # nothing to decode; whether that is allowed depends on the message's place
        return role, (), 0, True
    content = f"{where}.content"
    if role == "system":
        return role, (Message(Role.SYSTEM, tuple(_system_blocks(message.content, content))),), 0, False
    if role == "user":
        return role, tuple(_user(message.content, content)), 0, False
    out = Decoded()
    blocks = _assistant(message.content, content, sealer, out)
    return role, ((Message(Role.ASSISTANT, blocks),) if blocks else ()), out.ignored_tokens, False


def _cache(control: w.CacheControlWire | None) -> CacheControl | None:
    return CacheControl(control.ttl) if control is not None else None


def _system(system: str | list[w.TextBlock] | None) -> list[Text]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Text(system)] if system else []
    return [Text(b.text, cache=_cache(b.cache_control)) for b in system]


def _system_blocks(content: str | list, where: str) -> list[Text]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    out: list[Text] = []
    for j, block in enumerate(content):
        if type(block) is not w.TextBlock:
            raise invalid(f"a system message holds text blocks only, got {block.type!r}", f"{where}.{j}.type")
        out.append(Text(block.text, cache=_cache(block.cache_control)))
    return out


def _image(block: w.ImageBlock, where: str) -> Image:
    source = block.source
    if type(source) is w.Base64Source:
        url = f"data:{source.media_type};base64,{source.data}"
    elif type(source) is w.URLSource:
        url = source.url
    else:
        raise invalid(f"image source type {source.type!r} is not supported (send base64 or url)", where)
    return Image(url, cache=_cache(block.cache_control))


def _document(block: w.DocumentBlock, where: str) -> Document:
    source = block.source
    if type(source) is w.Base64Source:
        url, media_type = f"data:{source.media_type};base64,{source.data}", source.media_type
    elif type(source) is w.PlainTextSource:
        data = base64.b64encode(source.data.encode()).decode()
        url, media_type = f"data:text/plain;base64,{data}", "text/plain"
    elif type(source) is w.URLSource:
        url, media_type = source.url, "application/pdf"
    else:
        raise invalid(
            f"document source type {source.type!r} is not supported (send base64, text or url)", where
        )
    return Document(url, media_type, block.title, _cache(block.cache_control))


def _user(content: str | list, where: str) -> list[Message]:
    """A user message: its tool results become TOOL messages and its own content USER messages, in
    the order the client gave them (repair merges and orders them per target)."""
    if isinstance(content, str):
        return [Message(Role.USER, (Text(content),))]
    runs: list[tuple[Role, list[Block]]] = []
    for j, block in enumerate(content):
        path = f"{where}.{j}"
        t = type(block)
        if t is w.ToolResultBlock:
            role, item = Role.TOOL, _tool_result(block, path)
        elif t is w.TextBlock:
            role, item = Role.USER, Text(block.text, cache=_cache(block.cache_control))
        elif t is w.ImageBlock:
            role, item = Role.USER, _image(block, f"{path}.source")
        elif t is w.DocumentBlock:
            role, item = Role.USER, _document(block, f"{path}.source")
        else:
            raise invalid(f"{block.type!r} blocks are not allowed in user messages", f"{path}.type")
        if runs and runs[-1][0] is role:
            runs[-1][1].append(item)
        else:
            runs.append((role, [item]))
    return [Message(role, tuple(blocks)) for role, blocks in runs]


def _tool_result(block: w.ToolResultBlock, where: str) -> ToolResult:
    content = block.content
    if content is None or isinstance(content, str):
        return ToolResult(block.tool_use_id, content or "", block.is_error, cache=_cache(block.cache_control))
    texts: list[str] = []
    images: list[Image] = []
    documents: list[Document] = []
    for k, part in enumerate(content):
        path = f"{where}.content.{k}"
        t = type(part)
        if t is w.TextBlock:
            texts.append(part.text)
        elif t is w.ImageBlock:
            images.append(_image(part, f"{path}.source"))
        elif t is w.DocumentBlock:
            documents.append(_document(part, f"{path}.source"))
        elif t is w.ToolReferenceBlock:
            # the tool's definition is in `tools`, which the gateway sends whole to every provider
            texts.append(f"Tool {part.tool_name} loaded.")
        else:
            raise invalid(f"{part.type!r} blocks are not supported inside a tool_result", f"{path}.type")
    return ToolResult(
        block.tool_use_id,
        "\n".join(texts),
        block.is_error,
        tuple(images),
        _cache(block.cache_control),
        tuple(documents),
    )


def _assistant(content: str | list, where: str, sealer: Sealer, out: Decoded) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (Text(content),) if content else ()
    blocks: list[Block] = []
    for j, block in enumerate(content):
        t = type(block)
        if t is w.TextBlock:
            citations = tuple(citation(c, _echoed) for c in block.citations or ())
            blocks.append(Text(block.text, cache=_cache(block.cache_control), citations=citations))
        elif t is w.OtherBlock and block.type == SERVER_TOOL_USE:
            raw = block.model_dump()
            if not isinstance(raw.get("id"), str) or not isinstance(raw.get("name"), str):
                raise invalid("a server_tool_use block needs an `id` and a `name`", f"{where}.{j}")
            blocks.append(server_call(raw, _echoed))
        elif t is w.OtherBlock and is_server_result(block.type):
            raw = block.model_dump()
            if not isinstance(raw.get("tool_use_id"), str):
                raise invalid("Field required", f"{where}.{j}.tool_use_id")
            blocks.append(server_result(raw, _echoed))
        elif t is w.ToolUseBlock:
            arguments = orjson.dumps(block.input).decode()
            blocks.append(ToolCall(block.id, block.name, arguments, cache=_cache(block.cache_control)))
        elif t is w.ThinkingBlock:
            blocks.append(_thinking_block(block, sealer, out))
        elif t is w.RedactedThinkingBlock:
            if block.data.startswith(SEALED_PREFIX):
                meta = sealer.unseal(block.data)
                if meta is None:
                    out.ignored_tokens += 1
                else:
                    blocks.append(Reasoning("", meta))
            elif block.data:
                blocks.append(anthropic_redacted(block.data))
        else:
            raise invalid(f"{block.type!r} blocks are not allowed in assistant messages", f"{where}.{j}.type")
    return tuple(blocks)


def _thinking_block(block: w.ThinkingBlock, sealer: Sealer, out: Decoded) -> Reasoning:
    signature = block.signature
    if signature.startswith(SEALED_PREFIX):
        meta = sealer.unseal(signature)
        if meta is None:  # forged, edited, or sealed under another deployment's secret
            out.ignored_tokens += 1
        return Reasoning(block.thinking, meta)
    if signature:
        return anthropic_thinking(block.thinking, signature)
    return Reasoning(block.thinking, None)


def _tools(tools: list | None) -> tuple[tuple[ToolSpec, ...], tuple[HostedTool, ...]]:
    specs: list[ToolSpec] = []
    hosted: list[HostedTool] = []
    names: set[str] = set()
    for k, tool in enumerate(tools or ()):
        name = tool.name
        if name in names:
            raise invalid("Tool names must be unique.", "tools")
        names.add(name)
        if type(tool) is w.ServerTool:
            spec = tool.model_dump(exclude_none=True)
            hosted.append(HostedTool(ANTHROPIC, tool.type, spec, required=True))
            continue
        schema = tool.input_schema
        if schema.get("type", "object") != "object":
            raise invalid("Input should be 'object'", f"tools.{k}.input_schema.type")
        specs.append(
            ToolSpec(
                name,
                tool.description or "",
                schema,
                strict=tool.strict,
                cache=_cache(tool.cache_control),
            )
        )
    return tuple(specs), tuple(hosted)


def _tool_choice(
    wire: w.MessagesRequest, names: set[str], declared: list[w.Tool] | None
) -> tuple[ToolChoice | None, bool | None]:
    choice = wire.tool_choice
    if choice is None:
        return None, None
    parallel = False if choice.disable_parallel_tool_use else None
    if choice.type == "tool":
        if not choice.name:
            raise invalid("Field required", "tool_choice.name")
        if choice.name not in names:
            raise invalid(f"Tool '{choice.name}' not found in `tools`", "tool_choice.name")
        return ToolChoice(ToolChoiceMode.TOOL, choice.name), parallel
    if choice.type == "any" and not names and not declared:
        raise invalid("`tool_choice` may only be specified while providing tools.", "tool_choice")
    mode = {"auto": ToolChoiceMode.AUTO, "any": ToolChoiceMode.REQUIRED, "none": ToolChoiceMode.NONE}
    return ToolChoice(mode[choice.type]), parallel


def _thinking(thinking: Any) -> tuple[bool | None, int | None]:
    """(thinking on/off, the client's budget). Adaptive thinking is on with no budget: each
    target sizes it (its configured budget, or the effort)."""
    if thinking is None:
        return None, None
    if type(thinking) is w.ThinkingEnabled:
        return True, thinking.budget_tokens
    if type(thinking) is w.ThinkingAdaptive:
        return True, None
    return False, None


def _anthropic_options(wire: w.MessagesRequest, headers: Mapping[str, str], out: Decoded) -> dict:
    options: dict[str, Any] = {}
    for name in ANTHROPIC_ONLY:
        value = getattr(wire, name)
        if value is not None:
            options[name] = value
    flags = betas(headers)
    if flags:
        options["betas"] = flags
    if out.display_omitted:
        options["thinking_display"] = "omitted"
    return {ANTHROPIC: options} if options else {}
