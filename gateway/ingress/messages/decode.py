"""Decode an Anthropic Messages request into the canonical Request (its messages' content:
gateway/ingress/messages/blocks.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson
from pydantic import ValidationError

from gateway.ingress.budget import KnownList
from gateway.ingress.errors import ClientError, invalid
from gateway.ingress.memo import Items, fresh_items
from gateway.ingress.messages import wire as w
from gateway.ingress.messages.blocks import (
    ANTHROPIC,
    Decoded,
    MessageDecoded,
    cache_of,
    message_of,
    system_of,
)
from gateway.ingress.tool_lists import ToolLists
from gateway.ingress.typed_items import TypedItems
from gateway.transcript.model import (
    Block,
    HostedTool,
    Message,
    Request,
    ResponseFormat,
    ToolChoice,
    ToolChoiceMode,
    ToolSpec,
)
from gateway.transcript.resume import Resumable
from gateway.transcript.seal import Sealer

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


EMPTY_CONTENT = "all messages must have non-empty content except for the optional final assistant message"


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
    system = system_of(wire.system)
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
            found = items.decode(i, lambda: message_of(message, f"messages.{i}", sealer))  # noqa: B023
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
                cache=cache_of(tool.cache_control),
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
