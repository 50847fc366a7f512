"""The Chat Completions codec shared by the OpenAI-style family (openai_chat, mistral, kimi,
deepseek). Each member differs only in data: a `ChatDialect` declared in its own module. Nothing
here branches on provider kind.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson

from gateway.providers import held_wire
from gateway.providers.base import (
    EncodeError,
    HttpRequest,
    document_text,
    function_tools_only,
    join_url,
    loads_or_none,
    tool_call_names,
)
from gateway.providers.held_wire import PLACE, HeldWire, Rendered
from gateway.providers.openai_compat.decode import ChatStreamDecoder, classify_payload
from gateway.providers.openai_compat.text_body import text_events
from gateway.providers.structured import schema_instructions
from gateway.transcript.events import ErrorCategory, Event, StreamError, UpstreamError
from gateway.transcript.model import (
    Document,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    Text,
    ToolCall,
    ToolChoiceMode,
    ToolResult,
)
from gateway.transcript.reasoning import ReasoningChoice, decision_of
from gateway.transcript.target import OFF, Capabilities, OutputMode, Target, ThinkingModel

# Role's members, looked up once: an enum member's lookup costs ~75 ns, per message here
_USER = Role.USER
_ASSISTANT = Role.ASSISTANT
_SYSTEM = Role.SYSTEM
_TOOL = Role.TOOL


class ReasoningReplay(str, enum.Enum):
    """How a dialect takes its own earlier reasoning back on an assistant message."""

    NONE = "none"  # the API has no input field for reasoning (OpenAI chat)
    FIELD = "field"  # `reasoning_content` string on the message (DeepSeek, Kimi)
    THINKING_CHUNKS = "thinking_chunks"  # content array with {type: thinking} chunks (Mistral)


@dataclass(frozen=True, slots=True)
class ChatDialect:
    """Everything that distinguishes one Chat Completions dialect from another."""

    kind: str
    capabilities: Capabilities
    max_tokens_field: str = "max_tokens"
    stream_usage_option: bool = True  # accepts stream_options.include_usage
    # how the decided reasoning (gateway/transcript/reasoning.py) is rendered, for the models of
    # `capabilities.thinking` that reason: `reasoning_effort` carries the effort ("none": off, on
    # models that can turn it off), and/or `thinking: {"type": "enabled"|"disabled"}` switches it
    # on models that can turn it off (DeepSeek, Kimi)
    effort_field: bool = False
    thinking_switch: bool = False
    # reasoning models refuse temperature/top_p (OpenAI)
    reasoning_refuses_sampling: bool = False
    reasoning_replay: ReasoningReplay = ReasoningReplay.NONE
    tool_message_name: bool = False  # tool messages carry the function name
    user_images: bool = True  # accepts image_url parts (text-only APIs refuse them)
    # how a user message carries a PDF: "file" parts with the data URL (OpenAI), "document_url"
    # parts with an http(s) URL (Mistral), or "" (none); a plain-text document is text everywhere
    documents: str = ""
    error_result_prefix: str = "Error: "
    # where the usage object reports cached prompt tokens, first match wins
    cache_read_paths: tuple[tuple[str, ...], ...] = (("prompt_tokens_details", "cached_tokens"),)
    # (lower-case message fragment, category) refinements of 4xx / in-stream errors
    error_messages: tuple[tuple[str, ErrorCategory], ...] = ()
    # provider error `type` / `code` value -> category, for any status
    error_types: Mapping[str, ErrorCategory] = field(default_factory=dict)
    # lower-case fragments of the dialect's context-window overflow message
    context_overflow: tuple[str, ...] = ("maximum context length",)


# The OpenAI wire format's own rejection texts; every dialect of the family can answer with them.
OPENAI_ERROR_MESSAGES: tuple[tuple[str, ErrorCategory], ...] = (
    ("must be followed by tool messages", ErrorCategory.PAIRING),
    ("must be a response to a preceeding message with 'tool_calls'", ErrorCategory.PAIRING),
    ("must be a response to a preceding message with 'tool_calls'", ErrorCategory.PAIRING),
    ("not found in 'tool_calls' of previous message", ErrorCategory.PAIRING),
)
OPENAI_ERROR_TYPES: Mapping[str, ErrorCategory] = MappingProxyType(
    {
        "insufficient_quota": ErrorCategory.QUOTA,
        "rate_limit_exceeded": ErrorCategory.RATE_LIMIT,
        "server_is_overloaded": ErrorCategory.OVERLOADED,
        "context_length_exceeded": ErrorCategory.TOO_LARGE,
        "invalid_api_key": ErrorCategory.AUTH,
    }
)


def _reasoning(body: dict[str, Any], choice: ReasoningChoice, model: ThinkingModel, d: ChatDialect) -> None:
    """The decided reasoning in the dialect's parameters; nothing for the model's default, or
    for a model that does not reason or cannot be switched."""
    if choice.default or not model.reasons:
        return
    if d.thinking_switch and model.can_off:
        body["thinking"] = {"type": "enabled" if choice.on else "disabled"}
    if d.effort_field and model.efforts:
        if choice.effort is not None:
            body["reasoning_effort"] = choice.effort
        elif not choice.on and not d.thinking_switch:
            body["reasoning_effort"] = OFF


_TOOL_CHOICE_WORDS = {
    ToolChoiceMode.AUTO: "auto",
    ToolChoiceMode.NONE: "none",
    ToolChoiceMode.REQUIRED: "required",
}


# --------------------------------------------------------------------------------------------
# request encoding

# each conversation's rendered messages, so that its next turn renders only what it adds
HELD = HeldWire(budget=16 << 20)


class ChatEncoder:
    def __init__(self, dialect: ChatDialect) -> None:
        self.dialect = dialect
        # the dialect's reasoning choices, read once (an assistant message asks them every time)
        self._chunked = dialect.reasoning_replay is ReasoningReplay.THINKING_CHUNKS
        self._field = dialect.reasoning_replay is ReasoningReplay.FIELD
        self._tool_turns_need_field = dialect.capabilities.reasoning_content_on_tool_turns

    def encode(self, request: Request, target: Target, api_key: str) -> HttpRequest:
        d = self.dialect
        function_tools_only(request, target.kind)
        names = tool_call_names(request) if d.tool_message_name else {}
        messages: list[dict[str, Any]] = []
        decision = decision_of(request, target, d.capabilities)
        mode = decision.output
        system = request.system_text()
        if mode is OutputMode.JSON_OBJECT and request.response_format.schema is not None:
            # JSON mode knows no schema: the model reads it with the opening instructions, the
            # same text every turn so the cached prefix holds
            instructions = schema_instructions(request.response_format)
            system = f"{system}\n\n{instructions}" if system else instructions
        if system:
            messages.append({"role": "system", "content": system})

        def encode(listed: tuple[Message, ...], start: int, out: list[dict[str, Any]]) -> None:
            message, assistant, keep = self._message, self._assistant, out.append
            # an agent's transcript is mostly one-call assistant turns and one-result tool
            # messages, with a text answer and a user's text between: theirs written here, what
            # `_assistant` / `_message` make of them (tests/providers/test_chat_wire_shapes.py),
            # without two calls a message (a cold 1,000-message turn's items: 0.39 -> 0.30 ms)
            empty_field = self._field and self._tool_turns_need_field
            prefix = d.error_result_prefix
            short = not d.tool_message_name
            tool, assistant_role, call_kind, result_kind = _TOOL, _ASSISTANT, ToolCall, ToolResult
            user, text_kind = _USER, Text
            position = start
            try:
                for position in range(start, len(listed)):
                    item = listed[position]
                    role, blocks = item.role, item.blocks
                    if len(blocks) == 1:
                        block = blocks[0]
                        kind = type(block)
                        if role is tool:
                            if short and kind is result_kind and not block.images:
                                content = block.content
                                if block.is_error:
                                    content = prefix + content
                                keep({"role": "tool", "tool_call_id": block.call_id, "content": content})
                                continue
                        elif role is assistant_role and kind is call_kind and not block.custom:
                            arguments = block.arguments or "{}"
                            function = {"name": block.name, "arguments": arguments}
                            call = {"id": block.id, "type": "function", "function": function}
                            if empty_field:
                                keep(
                                    {
                                        "role": "assistant",
                                        "content": None,
                                        "reasoning_content": "",
                                        "tool_calls": [call],
                                    }
                                )
                            else:
                                keep({"role": "assistant", "content": None, "tool_calls": [call]})
                            continue
                        elif kind is text_kind and (role is user or role is assistant_role):
                            # its text is the content (`_assistant` keeps no field and no chunk
                            # list for a turn without reasoning and calls); a system message's
                            # goes to `_message`
                            keep({"role": role.value, "content": block.text})
                            continue
                    if role is assistant_role:
                        keep(assistant(item, target))
                    else:
                        message(item, target, names, out)
            except EncodeError as exc:
                raise EncodeError(f"messages[{position}]: {exc}") from None

        body: dict[str, Any] = {"model": target.model}
        rendered: Rendered | None = None
        if d.tool_message_name or len(request.messages) < held_wire.MIN_MESSAGES:
            # a tool message's `name` is its call's, from elsewhere; a short list is held nowhere
            # (`HeldWire.rendered`): written with the body, as a list rendered afresh is
            encode(request.messages, 0, messages)
            body["messages"] = messages
        else:
            # rendered here (its errors first, as before), joined into the body once it is written
            rendered = HELD.rendered(request.messages, (d, target), messages, encode)
            body["messages"] = PLACE
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.tool_choice is not None and request.tools:  # refused without tools
            choice = request.tool_choice
            if choice.mode is ToolChoiceMode.TOOL:
                if not choice.name:
                    raise EncodeError("tool_choice names no tool")
                body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
            else:
                body["tool_choice"] = _TOOL_CHOICE_WORDS[choice.mode]
        if request.parallel_tool_calls is not None and request.tools:
            body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.max_tokens is not None:
            body[d.max_tokens_field] = request.max_tokens
        model = d.capabilities.thinking.model(target.model)
        if not (d.reasoning_refuses_sampling and model.reasons):
            if request.temperature is not None:
                body["temperature"] = request.temperature
            if request.top_p is not None:
                body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if mode is not None:
            body["response_format"] = _response_format(request, target, mode, d.capabilities)
        _reasoning(body, decision.reasoning, model, d)
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        if request.stream:
            body["stream"] = True
            if d.stream_usage_option:
                body["stream_options"] = {"include_usage": True}
            headers["Accept"] = "text/event-stream"
        wire = orjson.dumps(body) if rendered is None else rendered.dumps(body)
        return HttpRequest(join_url(target.base_url, "/chat/completions"), headers, wire)

    def _message(
        self, message: Message, target: Target, names: dict[str, str], out: list[dict[str, Any]]
    ) -> None:
        """A message other than an assistant turn (`encode` hands those to `_assistant`)."""
        role = message.role
        if role is _TOOL:
            named = self.dialect.tool_message_name
            for block in message.blocks:
                if type(block) is not ToolResult:
                    raise EncodeError(f"a tool message holds a {type(block).__name__} block")
                if block.images:
                    raise EncodeError("Chat Completions tool messages cannot carry images")
                content = (
                    self.dialect.error_result_prefix + block.content if block.is_error else block.content
                )
                tool_msg: dict[str, Any] = {"role": "tool", "tool_call_id": block.call_id, "content": content}
                if named:
                    name = names.get(block.call_id)
                    if name is None:
                        raise EncodeError(
                            f"tool result {block.call_id!r} answers no tool call in the transcript"
                        )
                    tool_msg["name"] = name
                out.append(tool_msg)
        elif role is _USER:
            out.append({"role": "user", "content": _user_content(message, self.dialect)})
        elif role is _SYSTEM:
            out.append({"role": "system", "content": _system_text(message)})
        else:  # pragma: no cover - Role is closed; assistant turns go to `_assistant`
            raise EncodeError(f"unknown role {role!r}")

    def _assistant(self, message: Message, target: Target) -> dict[str, Any]:
        chunked = self._chunked
        texts: list[str] = []
        reasoning: list[str] = []
        chunks: list[dict[str, Any]] = []  # THINKING_CHUNKS: the content array in block order
        calls: list[dict[str, Any]] = []
        for block in message.blocks:
            t = type(block)
            if t is ToolCall:  # first: an agent's assistant turns are mostly calls
                if block.custom:
                    raise EncodeError("custom (freeform) tool calls must reach chat APIs as function calls")
                calls.append(_function_call(block))
            elif t is Text:
                texts.append(block.text)
                if chunked and block.text:
                    chunks.append({"type": "text", "text": block.text})
            elif t is Reasoning:
                if not target.owns(block.meta):
                    raise EncodeError(
                        "reasoning from another issuer reached the encoder (repair must drop it)"
                    )
                reasoning.append(block.text)
                if chunked:
                    chunks.append({"type": "thinking", "thinking": [{"type": "text", "text": block.text}]})
            elif t is Image or t is ToolResult:
                raise EncodeError(f"an assistant message cannot hold a {t.__name__} block")
            else:
                raise EncodeError(f"unsupported block {t.__name__}")
        out: dict[str, Any] = {"role": "assistant"}
        if chunked and reasoning:
            out["content"] = chunks
        else:
            # NONE: OpenAI chat has no reasoning input; its capabilities say it replays nothing
            text = "".join(texts) if texts else ""
            out["content"] = text if text or not calls else None
        # thinking-mode APIs reject a tool-call turn without reasoning_content, even an empty one
        if self._field and (reasoning or (calls and self._tool_turns_need_field)):
            out["reasoning_content"] = "".join(reasoning)
        if calls:
            out["tool_calls"] = calls
        return out


def _function_call(block: ToolCall) -> dict[str, Any]:
    return {
        "id": block.id,
        "type": "function",
        "function": {"name": block.name, "arguments": block.arguments or "{}"},
    }


def _response_format(
    request: Request, target: Target, mode: OutputMode, caps: Capabilities
) -> dict[str, Any]:
    fmt = request.response_format
    assert fmt is not None
    if request.tools and not caps.structured_output.with_tools(target.model):
        raise EncodeError(f"{target.model} cannot combine tools with a JSON response format")
    if mode is OutputMode.JSON_OBJECT:
        return {"type": "json_object"}
    if mode is not OutputMode.SCHEMA:
        raise EncodeError(f"structured output mode {mode.value} is not a Chat Completions one")
    spec: dict[str, Any] = {"name": fmt.name}
    if fmt.description:
        spec["description"] = fmt.description
    spec["schema"] = dict(fmt.schema or {})
    if fmt.strict is not None:
        spec["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": spec}


def _system_text(message: Message) -> str:
    for block in message.blocks:
        if type(block) is not Text:
            raise EncodeError(f"a system message holds a {type(block).__name__} block")
    return message.text()


def _user_content(message: Message, dialect: ChatDialect) -> str | list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    plain = True
    for block in message.blocks:
        t = type(block)
        if t is Text:
            parts.append({"type": "text", "text": block.text})
        elif t is Document:
            text = document_text(block)
            if text is not None:
                parts.append({"type": "text", "text": text})
                continue
            plain = False
            parts.append(_document_part(block, dialect))
        elif t is Image:
            if not dialect.user_images:
                raise EncodeError("this provider takes text only: a user message holds an image")
            plain = False
            image: dict[str, Any] = {"url": block.url}
            if block.detail:
                image["detail"] = block.detail
            parts.append({"type": "image_url", "image_url": image})
        else:
            raise EncodeError(f"a user message cannot hold a {t.__name__} block")
    if plain:
        return "".join(p["text"] for p in parts)
    return parts


def _document_part(document: Document, dialect: ChatDialect) -> dict[str, Any]:
    data_url = document.source.startswith("data:")
    if dialect.documents == "file" and data_url and document.media_type == "application/pdf":
        filename = document.title or "document.pdf"
        return {"type": "file", "file": {"filename": filename, "file_data": document.source}}
    if dialect.documents == "document_url" and not data_url:
        part = {"type": "document_url", "document_url": document.source}
        if document.title:
            part["document_name"] = document.title
        return part
    if dialect.documents == "file":
        raise EncodeError(
            f"{dialect.kind} takes PDF documents as base64 data, not {document.media_type} or URLs"
        )
    if dialect.documents == "document_url":
        raise EncodeError(f"{dialect.kind} takes documents by URL only, not as inline data")
    raise EncodeError(f"{dialect.kind} does not take documents (only plain text)")


# --------------------------------------------------------------------------------------------
# the adapter


class ChatAdapter:
    """A ProviderAdapter for one Chat Completions dialect."""

    def __init__(self, dialect: ChatDialect) -> None:
        self.dialect = dialect
        self.kind = dialect.kind
        self.capabilities = dialect.capabilities
        self._encoder = ChatEncoder(dialect)

    def encode_request(self, request: Request, target: Target, api_key: str) -> HttpRequest:
        return self._encoder.encode(request, target, api_key)

    def stream_decoder(self, target: Target, request: Request | None = None) -> ChatStreamDecoder:
        return ChatStreamDecoder(target, self.dialect)

    def decode_response(self, body: bytes, target: Target, request: Request | None = None) -> list[Event]:
        try:  # nearly every body: its events made at once (text_body.py)
            events = text_events(body, self.dialect)
        except (AttributeError, TypeError) as exc:
            return [StreamError(UpstreamError(ErrorCategory.PROTOCOL, f"malformed response body: {exc}"))]
        if events is not None:
            return events
        # a complete message has the shape of one big delta: decode it as a one-chunk stream
        decoder = ChatStreamDecoder(target, self.dialect)
        out: list[Event] = []
        payload = loads_or_none(body)
        if type(payload) is not dict:
            return [
                StreamError(
                    UpstreamError(ErrorCategory.PROTOCOL, "upstream response body is not a JSON object")
                )
            ]
        try:
            decoder.on_chunk(payload, "message", out)
        except (AttributeError, TypeError) as exc:
            return [StreamError(UpstreamError(ErrorCategory.PROTOCOL, f"malformed response body: {exc}"))]
        decoder.end_body(out)
        return out

    def classify_error(self, status: int, headers: Mapping[str, str], body: bytes) -> UpstreamError:
        payload = loads_or_none(body)
        if type(payload) is dict:
            error = payload.get("error")
            if error is None and (payload.get("object") == "error" or "message" in payload):
                error = payload  # Mistral's flat error body
            if error is None and "detail" in payload:
                error = {"message": payload["detail"]}
        else:
            text = body.decode("utf-8", "replace").strip() if body else ""
            error = {"message": text[:500]} if text else None
        return classify_payload(self.dialect, status, error or {}, headers)
