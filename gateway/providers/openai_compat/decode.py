"""Decoding what a Chat Completions dialect sends back: SSE streams, whole bodies (decoded as a
one-chunk stream), and error objects."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import orjson

from gateway.providers.base import (
    SSEStreamDecoder,
    category_for_status,
    loads_or_none,
    overflow_code,
    retry_after_header,
)
from gateway.providers.openai_compat import text_chunk
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Event,
    Finish,
    MessageStart,
    StreamError,
    UpstreamError,
    UsageUpdate,
)
from gateway.transcript.model import Citation, Continuity, StopReason, Usage
from gateway.transcript.target import Target

if TYPE_CHECKING:
    from gateway.providers.openai_compat.adapter import ChatDialect

FINISH_REASONS: Mapping[str, StopReason] = MappingProxyType(
    {
        "stop": StopReason.END_TURN,
        "tool_calls": StopReason.TOOL_CALLS,
        "function_call": StopReason.TOOL_CALLS,
        "length": StopReason.MAX_TOKENS,
        "model_length": StopReason.MAX_TOKENS,
        "content_filter": StopReason.CONTENT_FILTER,
        "error": StopReason.ERROR,
        "insufficient_system_resource": StopReason.ERROR,
    }
)


class ChatStreamDecoder(SSEStreamDecoder):
    """`data: {chunk}` events closed by `data: [DONE]`. The finish_reason chunk closes the blocks;
    usage (which OpenAI sends after it, in a `choices: []` chunk) and Finish are emitted at [DONE]."""

    def __init__(self, target: Target, dialect: ChatDialect) -> None:
        super().__init__(target)
        self.dialect = dialect
        self._started = False
        self._next = 0
        self._text: int | None = None
        # url_citation annotations of the text (OpenAI's search models: message.annotations)
        self._notes: list[Any] = []
        self._text_parts: list[str] = []
        self._reasoning: int | None = None
        self._refusal: int | None = None
        self._refused = False
        self._tools: dict[int, int] = {}  # provider tool index -> block index
        self._open_tools: list[int] = []
        self._last_tool: int | None = None
        self._unindexed = 0
        self._saw_tool = False
        self._stop: StopReason | None = None
        self._usage: Usage | None = None
        # made when the first reasoning block closes: most answers have none
        self._reasoning_meta: Continuity | None = None

    def on_event(self, name: str, data: str, out: list[Event]) -> None:
        if data == "[DONE]":
            self.done = True
            self._complete(out)
            return
        # nearly every chunk, the first included: the typed decode (text_chunk.py)
        started = self._started
        try:
            text = (text_chunk.DECODER if started else text_chunk.OPENING).decode(data)
        except text_chunk.NOT_THE_SHAPE:
            pass
        else:
            if self._typed_chunk(text, out) if started else self._typed_opening(text, out):  # type: ignore[arg-type]
                return
        self._dict_chunk(data, out)

    def on_data(self, data: bytes, out: list[Event]) -> None:
        """`on_event` for the bytes of an unnamed event: msgspec reads them as they are (one UTF-8
        decode less per chunk), the same typed decode; anything else takes `on_event`'s path."""
        if data == b"[DONE]":
            self.done = True
            self._complete(out)
            return
        started = self._started
        try:
            text = (text_chunk.DECODER if started else text_chunk.OPENING).decode(data)
        except UnicodeDecodeError:  # invalid UTF-8: decoded with replacements, as before
            self.on_event("", data.decode("utf-8", "replace"), out)
            return
        except text_chunk.NOT_THE_SHAPE:  # not the shape: the dict path (the typed failed)
            self._dict_chunk(data.decode("utf-8", "replace"), out)
            return
        if started:
            # nearly every chunk: one choice's text (or reasoning) delta, its block open: what
            # `_typed_chunk` does for it, a call less per chunk
            choices = text.choices
            if choices is not None and len(choices) == 1 and not text.usage:
                choice = choices[0]
                delta = choice.delta
                if delta is not None and choice.index == 0 and not choice.finish_reason and not choice.usage:
                    content, reasoning = delta.content, delta.reasoning_content
                    if content and not reasoning and self._text is not None:
                        self._text_parts.append(content)
                        out.append(BlockDelta(self._text, content))
                        return
                    if reasoning and not content and self._reasoning is not None:
                        out.append(BlockDelta(self._reasoning, reasoning))
                        return
            if self._typed_chunk(text, out):
                return
        elif self._typed_opening(text, out):  # type: ignore[arg-type]
            return
        self._dict_chunk(data.decode("utf-8", "replace"), out)

    def _typed_opening(self, chunk: text_chunk.OpeningChunk, out: list[Event]) -> bool:
        """`_typed_chunk` for a chunk before the answer started (`on_chunk`'s MessageStart first);
        False, with nothing done, as there."""
        if not (chunk.id or chunk.choices):
            return self._typed_chunk(chunk, out)
        at = len(out)
        self._started = True
        out.append(MessageStart(chunk.id or "", chunk.model or ""))
        if self._typed_chunk(chunk, out):
            return True
        del out[at:]
        self._started = False
        return False

    def _typed_chunk(self, chunk: text_chunk.TextChunk, out: list[Event]) -> bool:
        """`on_chunk` for a chunk of the typed shape: the same events in the same order. False,
        with nothing done, when a usage in it is not JSON orjson reads (the dict path then fails
        the chunk as a whole, as it would have)."""
        choices = chunk.choices
        if choices is not None and len(choices) == 1 and not chunk.usage:
            choice = choices[0]
            if not choice.usage:  # nearly every chunk: a text delta, or the finish
                delta = choice.delta
                if choice.index == 0:
                    if delta is not None:
                        if delta.reasoning_content:
                            self._reasoning_text(delta.reasoning_content, out)
                        content = delta.content
                        if content:
                            if self._text is None:
                                self._plain_text(content, out)
                            else:  # `_plain_text` with its block open
                                self._text_parts.append(content)
                                out.append(BlockDelta(self._text, content))
                    if choice.finish_reason:
                        self._finish(choice.finish_reason, out)
                return True
        return self._typed_ending(chunk, out)

    def _typed_ending(self, chunk: text_chunk.TextChunk, out: list[Event]) -> bool:
        """`_typed_chunk` for any chunk of the shape: a finish, a usage, several choices."""
        usage: Any = None
        usages: list[Any] | None = None  # per choice, read before any event: all or nothing
        choices = chunk.choices or ()
        try:
            if chunk.usage:
                usage = orjson.loads(memoryview(chunk.usage))
            for at, choice in enumerate(choices):
                if choice.usage:
                    if usages is None:
                        usages = [None] * len(choices)
                    usages[at] = orjson.loads(memoryview(choice.usage))
        except orjson.JSONDecodeError:
            return False
        for at, choice in enumerate(choices):
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                if delta.reasoning_content:
                    self._reasoning_text(delta.reasoning_content, out)
                if delta.content:
                    self._plain_text(delta.content, out)
            if usages is not None and usages[at]:
                usage = usages[at]
            if choice.finish_reason:
                self._finish(choice.finish_reason, out)
        if usage:
            try:
                self._usage = usage_of(self.dialect, usage)
            except (AttributeError, TypeError) as exc:  # as `_dict_chunk` reports it
                self._fail(out, ErrorCategory.PROTOCOL, f"malformed stream chunk: {exc}")
        return True

    def _dict_chunk(self, data: str, out: list[Event]) -> None:
        chunk = loads_or_none(data)
        if type(chunk) is not dict:
            self._fail(out, ErrorCategory.PROTOCOL, "upstream sent a stream chunk that is not a JSON object")
            return
        try:
            self.on_chunk(chunk, "delta", out)
        except (AttributeError, TypeError) as exc:
            self._fail(out, ErrorCategory.PROTOCOL, f"malformed stream chunk: {exc}")

    def on_chunk(self, chunk: dict[str, Any], field_name: str, out: list[Event]) -> None:
        error = chunk.get("error")
        if error:
            self._fail_with(out, classify_payload(self.dialect, 0, error, {}))
            return
        choices = chunk.get("choices") or ()
        if not self._started and (chunk.get("id") or choices):
            self._started = True
            out.append(MessageStart(chunk.get("id") or "", chunk.get("model") or ""))
        usage = chunk.get("usage")
        for choice in choices:
            if choice.get("index", 0) != 0:
                continue  # the gateway asks for one choice; others are not part of this answer
            delta = choice.get(field_name)
            if delta:
                self._delta(delta, out)
                if self.failed:
                    return
            if choice.get("usage"):
                usage = choice["usage"]  # Kimi reports usage inside the choice as well
            reason = choice.get("finish_reason")
            if reason:
                self._finish(reason, out)
        if usage:
            self._usage = usage_of(self.dialect, usage)

    def _finish(self, reason: Any, out: list[Event]) -> None:
        self._close_all(out)
        stop = FINISH_REASONS.get(reason)
        if stop is None:
            stop = StopReason.TOOL_CALLS if self._saw_tool else StopReason.END_TURN
        if self._refused and stop is StopReason.END_TURN:
            stop = StopReason.REFUSAL  # OpenAI finishes a refusal with "stop"
        self._stop = stop

    def _delta(self, delta: dict[str, Any], out: list[Event]) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning:
            self._reasoning_text(reasoning, out)
        content = delta.get("content")
        if content:
            if type(content) is str:
                self._plain_text(content, out)
            elif type(content) is list:
                self._content_chunks(content, out)
            else:
                self._fail(
                    out, ErrorCategory.PROTOCOL, f"unexpected content of type {type(content).__name__}"
                )
                return
        notes = delta.get("annotations")
        if notes and type(notes) is list:
            self._notes.extend(notes)
        refusal = delta.get("refusal")
        if refusal:
            if type(refusal) is not str:
                kind = type(refusal).__name__
                self._fail(out, ErrorCategory.PROTOCOL, f"unexpected refusal of type {kind}")
                return
            if self._refusal is None:
                self._close_text(out)
                self._close_reasoning(out)
                self._refusal = self._start(out, BlockKind.REFUSAL)
                self._refused = True
            out.append(BlockDelta(self._refusal, refusal))
        calls = delta.get("tool_calls")
        if calls:
            for call in calls:
                if self.failed:
                    return
                self._tool_call(call, out)

    def _content_chunks(self, content: list[Any], out: list[Event]) -> None:
        for chunk in content:
            kind = chunk.get("type") if type(chunk) is dict else None
            if kind == "text":
                if chunk.get("text"):
                    self._plain_text(chunk["text"], out)
            elif kind == "thinking":
                for part in chunk.get("thinking") or ():
                    if part.get("type") != "text":
                        self._fail(
                            out, ErrorCategory.PROTOCOL, f"unsupported thinking chunk {part.get('type')!r}"
                        )
                        return
                    if part.get("text"):
                        self._reasoning_text(part["text"], out)
            else:
                self._fail(out, ErrorCategory.PROTOCOL, f"unsupported content chunk type {kind!r}")
                return

    def _plain_text(self, text: str, out: list[Event]) -> None:
        if self._text is None:
            if self._reasoning is not None:
                self._close_reasoning(out)
            self._text = self._start(out, BlockKind.TEXT)
            self._text_parts = []
        self._text_parts.append(text)
        out.append(BlockDelta(self._text, text))

    def _reasoning_text(self, text: str, out: list[Event]) -> None:
        if self._reasoning is None:
            self._close_text(out)
            self._reasoning = self._start(out, BlockKind.REASONING)
        out.append(BlockDelta(self._reasoning, text))

    def _tool_call(self, call: dict[str, Any], out: list[Event]) -> None:
        function = call.get("function") or {}
        key = call.get("index")
        if key is None:
            # Mistral sends every call whole, without an index: a fragment naming an id or a
            # function starts a new call, anything else continues the latest one
            if call.get("id") or function.get("name") or self._last_tool is None:
                self._unindexed -= 1
                key = self._unindexed
            else:
                key = self._last_tool
        block = self._tools.get(key)
        if block is None:
            if not function.get("name"):
                # every dialect names the function in a call's first fragment; a nameless call
                # would reach the client as a call to nothing
                self._fail(out, ErrorCategory.PROTOCOL, f"tool call {key} started without a function name")
                return
            self._close_text(out)
            self._close_reasoning(out)
            block = self._start(out, BlockKind.TOOL_CALL, call.get("id") or "", function.get("name") or "")
            self._tools[key] = block
            self._open_tools.append(block)
            self._saw_tool = True
        self._last_tool = key
        arguments = function.get("arguments")
        if arguments:
            out.append(
                BlockDelta(block, arguments if type(arguments) is str else orjson.dumps(arguments).decode())
            )

    def _start(self, out: list[Event], kind: BlockKind, id: str = "", name: str = "") -> int:
        index = self._next
        self._next += 1
        out.append(BlockStart(index, kind, id, name))
        return index

    def _close_text(self, out: list[Event]) -> None:
        if self._text is not None:
            out.append(BlockStop(self._text, None, self._citations() if self._notes else ()))
            self._text = None

    def _citations(self) -> tuple[Citation, ...]:
        """Chat's url_citation annotations ({"type": "url_citation", "url_citation": {url, title,
        start_index, end_index}}, https://platform.openai.com/docs/guides/tools-web-search?api-mode=chat):
        readable citations; Chat history has no place to send them back, so every family gets
        them as text."""
        if not self._notes:
            return ()
        text = "".join(self._text_parts)
        out = []
        for note in self._notes:
            cite = note.get("url_citation") if isinstance(note, dict) else None
            if isinstance(cite, dict) and cite.get("url"):
                start, end = cite.get("start_index"), cite.get("end_index")
                cited = text[start:end] if isinstance(start, int) and isinstance(end, int) else ""
                out.append(Citation(str(cite["url"]), str(cite.get("title") or ""), cited))
        self._notes = []
        return tuple(out)

    def _close_reasoning(self, out: list[Event]) -> None:
        if self._reasoning is not None:
            if self._reasoning_meta is None:
                self._reasoning_meta = self.target.continuity({})
            out.append(BlockStop(self._reasoning, self._reasoning_meta))
            self._reasoning = None

    def _close_all(self, out: list[Event]) -> None:
        if self._reasoning is not None:
            self._close_reasoning(out)
        if self._text is not None:
            self._close_text(out)
        if self._refusal is not None:
            out.append(BlockStop(self._refusal))
            self._refusal = None
        for block in self._open_tools:
            out.append(BlockStop(block))
        self._open_tools.clear()

    def end_body(self, out: list[Event]) -> None:
        """A non-streaming body was fed whole: close what it opened and finish."""
        if not self.failed and self._stop is None:
            self._close_all(out)
        self._complete(out)

    def _complete(self, out: list[Event]) -> None:
        if self.failed:
            return
        if self._stop is None:
            self._fail(out, ErrorCategory.PROTOCOL, "upstream ended the answer without a finish_reason")
            return
        if self._usage is not None:
            out.append(UsageUpdate(self._usage))
        out.append(Finish(self._stop))

    def _fail_with(self, out: list[Event], error: UpstreamError) -> None:
        if not self.failed:
            self.failed = True
            out.append(StreamError(error))


def usage_of(dialect: ChatDialect, raw: dict[str, Any]) -> Usage:
    """A usage object as the gateway counts it (AttributeError/TypeError when it is no object:
    the caller reports a malformed answer)."""
    cache_read = 0
    for path in dialect.cache_read_paths:
        value: Any = raw
        for key in path:
            value = value.get(key) if type(value) is dict else None
        if value:
            cache_read = value
            break
    details = raw.get("completion_tokens_details")
    reasoning = (details.get("reasoning_tokens") or 0) if type(details) is dict else 0
    return Usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        cache_read_tokens=cache_read,
        reasoning_tokens=reasoning,
    )


def classify_payload(
    dialect: ChatDialect, status: int, error: Any, headers: Mapping[str, str]
) -> UpstreamError:
    """An error object (`{"message", "type", "code", ...}` or a bare string) as an UpstreamError."""
    if type(error) is dict:
        raw_message = error.get("message")
        err_type = error.get("type")
        code = error.get("code")
    else:
        raw_message, err_type, code = error, None, None
    if raw_message is None:
        message = ""
    elif type(raw_message) is str:
        message = raw_message
    else:  # Mistral validation errors carry a structured `message`
        message = orjson.dumps(raw_message).decode()
    err_type = str(err_type) if err_type is not None else ""
    code = str(code) if code is not None else None
    category = None
    if status == 0 or 400 <= status < 500:
        lowered = message.lower()
        for fragment, rule_category in dialect.error_messages:
            if fragment in lowered:
                category = rule_category
                break
    if category is None:
        category = dialect.error_types.get(err_type) or (dialect.error_types.get(code) if code else None)
    if category is None:
        category = category_for_status(status) if status else ErrorCategory.SERVER
    return UpstreamError(
        category,
        message or f"upstream error (HTTP {status})",
        status=status,
        type=err_type,
        code=overflow_code(message, code, dialect.context_overflow),
        retry_after=retry_after_header(headers),
    )
