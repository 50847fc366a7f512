"""Gemini generateContent / streamGenerateContent (v1beta, Google AI and Vertex express).

Continuity lives in `thoughtSignature`s on parts. Gemini validates them per part, so the decoder
keeps every signed part as its own block (a signed text part is never merged with unsigned text)
and the encoder puts each signature back on the part it came from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import pairwise
from types import MappingProxyType
from typing import Any

import orjson

from gateway.providers.base import (
    Adapter,
    Family,
    SSEStreamDecoder,
    category_for_status,
    loads_or_none,
    overflow_code,
    retry_after_header,
)
from gateway.providers.gemini.request import (
    CAPABILITIES,
    SIGNATURE,
    decode_count,
    encode_count,
    encode_request,
)
from gateway.providers.gemini_grounding import grounding_blocks
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
from gateway.transcript.model import Continuity, Request, StopReason, Usage
from gateway.transcript.target import Target

KIND = "gemini"

FINISH_REASONS: Mapping[str, StopReason] = MappingProxyType(
    {
        "STOP": StopReason.END_TURN,  # TOOL_CALLS when the answer holds function calls
        "MAX_TOKENS": StopReason.MAX_TOKENS,
        "SAFETY": StopReason.CONTENT_FILTER,
        "RECITATION": StopReason.CONTENT_FILTER,
        "BLOCKLIST": StopReason.CONTENT_FILTER,
        "PROHIBITED_CONTENT": StopReason.CONTENT_FILTER,
        "SPII": StopReason.CONTENT_FILTER,
        "IMAGE_SAFETY": StopReason.CONTENT_FILTER,
        "IMAGE_PROHIBITED_CONTENT": StopReason.CONTENT_FILTER,
        "IMAGE_RECITATION": StopReason.CONTENT_FILTER,
    }
)  # anything else (MALFORMED_FUNCTION_CALL, OTHER, ...) ended the answer abnormally: ERROR

ERROR_MESSAGES: tuple[tuple[str, ErrorCategory], ...] = (
    ("missing a thought_signature", ErrorCategory.CONTINUITY),
    ("thought signature is not valid", ErrorCategory.CONTINUITY),
    ("corrupted thought signature", ErrorCategory.CONTINUITY),
    ("number of function response parts", ErrorCategory.PAIRING),
    ("function call turn comes immediately", ErrorCategory.PAIRING),
    ("function response turn comes immediately", ErrorCategory.PAIRING),
    ("api key not valid", ErrorCategory.AUTH),
)

ERROR_STATUSES: Mapping[str, ErrorCategory] = MappingProxyType(
    {
        "RESOURCE_EXHAUSTED": ErrorCategory.RATE_LIMIT,
        "UNAVAILABLE": ErrorCategory.OVERLOADED,
        "UNAUTHENTICATED": ErrorCategory.AUTH,
        "PERMISSION_DENIED": ErrorCategory.PERMISSION,
        "NOT_FOUND": ErrorCategory.NOT_FOUND,
        "DEADLINE_EXCEEDED": ErrorCategory.TIMEOUT,
        "INTERNAL": ErrorCategory.SERVER,
    }
)

_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


# --------------------------------------------------------------------------------------------
# stream decoding


class _PartialCall:
    """A function call Vertex streams as `partialArgs` fragments until `willContinue` is false."""

    __slots__ = ("args", "id", "index", "open_string", "signature")

    def __init__(self, index: int, id: str, signature: str | None) -> None:
        self.index = index
        self.id = id
        self.signature = signature
        self.args: dict[str, Any] = {}
        self.open_string: str | None = None  # jsonPath of a string value still being streamed


class GeminiStreamDecoder(SSEStreamDecoder):
    """`data: {GenerateContentResponse}` events; no [DONE]: the chunk with a finishReason ends it."""

    def __init__(self, target: Target, request: Request | None = None) -> None:
        super().__init__(target)
        self._started = False
        self._next = 0
        self._open: int | None = None  # the unsigned text or thought block parts may extend
        self._open_kind: BlockKind | None = None
        self._partial: _PartialCall | None = None
        self._saw_call = False
        self._usage: Usage | None = None
        self._grounding: dict[str, Any] | None = None  # the candidate's latest groundingMetadata

    def on_event(self, name: str, data: str, out: list[Event]) -> None:
        if self.done:
            return
        chunk = loads_or_none(data)
        if type(chunk) is not dict:
            self._fail(out, ErrorCategory.PROTOCOL, "upstream sent a stream chunk that is not a JSON object")
            return
        self._object(chunk, out)

    def on_data(self, data: bytes, out: list[Event]) -> None:
        """`on_event` for the bytes of an unnamed event, parsed as they are (one UTF-8 decode
        less per chunk); what orjson refuses (invalid UTF-8 among it) takes `on_event`'s path."""
        if self.done:
            return
        chunk = loads_or_none(data)
        if type(chunk) is not dict:
            self.on_event("", data.decode("utf-8", "replace"), out)
            return
        self._object(chunk, out)

    def _object(self, chunk: dict[str, Any], out: list[Event]) -> None:
        try:
            self.on_chunk(chunk, out)
        except (AttributeError, TypeError, ValueError) as exc:
            self._fail(out, ErrorCategory.PROTOCOL, f"malformed stream chunk: {exc}")

    def on_chunk(self, chunk: dict[str, Any], out: list[Event]) -> None:
        error = chunk.get("error")
        if error:
            if not self.failed:
                self.failed = True
                out.append(StreamError(classify_payload(0, error, {})))
            return
        if not self._started:
            self._started = True
            out.append(MessageStart(chunk.get("responseId") or "", chunk.get("modelVersion") or ""))
        usage = chunk.get("usageMetadata")
        if usage:
            first = self._usage is None
            self._usage = _usage(usage)
            if first and usage.get("promptTokenCount"):
                # the prompt's size is known with the first chunk: a client may show it at once
                out.append(UsageUpdate(self._usage))
        candidates = chunk.get("candidates")
        if not candidates:
            feedback = chunk.get("promptFeedback")
            if feedback and feedback.get("blockReason"):
                self._end(StopReason.CONTENT_FILTER, out)
            return
        candidate = candidates[0]
        grounding = candidate.get("groundingMetadata")
        if isinstance(grounding, dict):
            self._grounding = grounding
        content = candidate.get("content")
        if content:
            for part in content.get("parts") or ():
                self._part(part, out)
                if self.failed:
                    return
        reason = candidate.get("finishReason")
        if reason:
            stop = FINISH_REASONS.get(reason, StopReason.ERROR)
            if stop is StopReason.END_TURN and self._saw_call:
                stop = StopReason.TOOL_CALLS
            self._end(stop, out)

    def _part(self, part: dict[str, Any], out: list[Event]) -> None:
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        if call is not None:
            self._function_call(call, signature, out)
        elif "text" in part or (signature and part.keys() <= {"thoughtSignature", "thought"}):
            kind = BlockKind.REASONING if part.get("thought") else BlockKind.TEXT
            self._text(kind, part.get("text") or "", signature, out)
        else:
            self._fail(out, ErrorCategory.PROTOCOL, f"unsupported Gemini part with keys {sorted(part)}")

    def _text(self, kind: BlockKind, text: str, signature: str | None, out: list[Event]) -> None:
        if signature is None:
            if not text:
                return
            index = self._open
            if index is None or self._open_kind is not kind:
                self._close_open(out)
                index = self._open = self._start(out, kind)
                self._open_kind = kind
            out.append(BlockDelta(index, text))
            return
        # a signed part is replayed exactly as it came, so it is a block of its own
        self._close_open(out)
        index = self._start(out, kind)
        if text:
            out.append(BlockDelta(index, text))
        out.append(BlockStop(index, self.target.continuity({SIGNATURE: signature})))

    def _function_call(self, call: dict[str, Any], signature: str | None, out: list[Event]) -> None:
        name = call.get("name")
        partial = self._partial
        if partial is not None and not name:
            if signature:
                partial.signature = signature
            self._continue_call(partial, call)
            if not call.get("willContinue"):
                self._end_call(partial, out)
            return
        if partial is not None:
            self._end_call(partial, out)
        if not name:
            self._fail(out, ErrorCategory.PROTOCOL, "functionCall part without a name")
            return
        self._close_open(out)
        self._saw_call = True
        native_id = call.get("id") or ""
        index = self._start(out, BlockKind.TOOL_CALL, native_id, name)
        if call.get("willContinue"):
            self._partial = _PartialCall(index, native_id, signature)
            self._continue_call(self._partial, call)
            return
        args = call.get("args")
        if args is not None:
            out.append(BlockDelta(index, orjson.dumps(args).decode()))
        out.append(BlockStop(index, self._call_meta(native_id, signature)))

    def _continue_call(self, partial: _PartialCall, call: dict[str, Any]) -> None:
        if "args" in call:
            partial.args = call["args"]
        for arg in call.get("partialArgs") or ():
            _apply_partial_arg(partial, arg)

    def _end_call(self, partial: _PartialCall, out: list[Event]) -> None:
        out.append(BlockDelta(partial.index, orjson.dumps(partial.args).decode()))
        out.append(BlockStop(partial.index, self._call_meta(partial.id, partial.signature)))
        self._partial = None

    def _call_meta(self, native_id: str, signature: str | None) -> Continuity | None:
        data: dict[str, str] = {}
        if signature:
            data[SIGNATURE] = signature
        if native_id:
            data["id"] = native_id
        return self.target.continuity(data) if data else None

    def _start(self, out: list[Event], kind: BlockKind, id: str = "", name: str = "") -> int:
        index = self._next
        self._next += 1
        out.append(BlockStart(index, kind, id, name))
        return index

    def _close_open(self, out: list[Event]) -> None:
        if self._open is not None:
            meta = self.target.continuity({}) if self._open_kind is BlockKind.REASONING else None
            out.append(BlockStop(self._open, meta))
            self._open = None
            self._open_kind = None

    def _end(self, stop: StopReason, out: list[Event]) -> None:
        if self._partial is not None:
            self._end_call(self._partial, out)
        self._close_open(out)
        if self._grounding is not None:
            self._grounded(self._grounding, out)
        if self._usage is not None:
            out.append(UsageUpdate(self._usage))
        out.append(Finish(stop))
        self.done = True

    def _grounded(self, raw: dict[str, Any], out: list[Event]) -> None:
        blocks = grounding_blocks(raw, self.target.continuity, f"grounding_{self._next}")
        if blocks is None:
            return
        call, result = blocks
        index = self._start(out, BlockKind.SERVER_TOOL_CALL, call.id, call.name)
        out.append(BlockDelta(index, call.input))
        out.append(BlockStop(index, call.meta))
        index = self._next
        self._next += 1
        out.append(BlockStart(index, BlockKind.SERVER_TOOL_RESULT, call.id, call.name, result=result))
        out.append(BlockStop(index))

    def end_body(self, out: list[Event]) -> None:
        """A non-streaming body was fed whole; it must have ended the answer."""
        if not self.done:
            self._fail(out, ErrorCategory.PROTOCOL, "upstream response has no finishReason")


def _apply_partial_arg(partial: _PartialCall, arg: dict[str, Any]) -> None:
    path = arg.get("jsonPath") or ""
    if "stringValue" in arg:
        value: Any = arg["stringValue"]
        if partial.open_string == path:
            value = _get_path(partial.args, path) + value
        partial.open_string = path if arg.get("willContinue") else None
    elif "numberValue" in arg:
        value = arg["numberValue"]
    elif "boolValue" in arg:
        value = arg["boolValue"]
    elif "nullValue" in arg:
        value = None
    else:
        raise ValueError(f"partialArgs entry without a value at {path!r}")
    _set_path(partial.args, path, value)


def _path_keys(path: str) -> list[str | int]:
    if not path.startswith("$"):
        raise ValueError(f"unsupported jsonPath {path!r}")
    keys: list[str | int] = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            raise ValueError(f"unsupported jsonPath {path!r}")
        dotted, number, single, double = match.groups()
        keys.append(int(number) if number is not None else (dotted or single or double or ""))
        pos = match.end()
    if not keys:
        raise ValueError("jsonPath names no argument")
    return keys


def _get_path(root: dict[str, Any], path: str) -> Any:
    node: Any = root
    for key in _path_keys(path):
        node = node[key]
    return node


def _set_path(root: dict[str, Any], path: str, value: Any) -> None:
    keys = _path_keys(path)
    node: Any = root
    for key, following in pairwise(keys):
        node = _slot(node, key, [] if type(following) is int else {})
    last = keys[-1]
    if type(last) is int:
        _grow(node, last)
    node[last] = value


def _slot(node: Any, key: str | int, empty: Any) -> Any:
    if type(key) is int:
        _grow(node, key)
        if node[key] is None:
            node[key] = empty
        return node[key]
    return node.setdefault(key, empty)


def _grow(items: list[Any], index: int) -> None:
    while len(items) <= index:
        items.append(None)


def _usage(raw: Mapping[str, Any]) -> Usage:
    thoughts = raw.get("thoughtsTokenCount") or 0
    return Usage(
        input_tokens=raw.get("promptTokenCount") or 0,  # includes cachedContentTokenCount
        output_tokens=(raw.get("candidatesTokenCount") or 0) + thoughts,
        cache_read_tokens=raw.get("cachedContentTokenCount") or 0,
        reasoning_tokens=thoughts,
    )


# --------------------------------------------------------------------------------------------
# errors


def _retry_delay(error: Mapping[str, Any]) -> float | None:
    for detail in error.get("details") or ():
        if type(detail) is dict and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            if type(delay) is str and delay.endswith("s"):
                try:
                    return max(0.0, float(delay[:-1]))
                except ValueError:
                    return None
    return None


# "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
CONTEXT_OVERFLOW_MARKERS = ("exceeds the maximum number of tokens",)


def classify_payload(status: int, error: Any, headers: Mapping[str, str]) -> UpstreamError:
    if type(error) is not dict:
        error = {"message": str(error)}
    message = error.get("message")
    message = message if type(message) is str else ("" if message is None else orjson.dumps(message).decode())
    status_text = str(error.get("status") or "")
    code = error.get("code")
    effective = status or (code if type(code) is int else 0)
    category = None
    if effective == 0 or 400 <= effective < 500:
        lowered = message.lower()
        category = next((c for fragment, c in ERROR_MESSAGES if fragment in lowered), None)
    if category is None:
        category = ERROR_STATUSES.get(status_text)
    if category is None:
        category = category_for_status(effective) if effective else ErrorCategory.SERVER
    retry_after = retry_after_header(headers)
    if retry_after is None:
        retry_after = _retry_delay(error)
    return UpstreamError(
        category,
        message or f"upstream error (HTTP {status})",
        status=status,
        type=status_text,
        code=overflow_code(message, str(code) if code is not None else None, CONTEXT_OVERFLOW_MARKERS),
        retry_after=retry_after,
    )


# --------------------------------------------------------------------------------------------
# the adapter


def decode_response(body: bytes, target: Target, request: Request | None = None) -> list[Event]:
    payload = loads_or_none(body)
    # streamGenerateContent without alt=sse answers a JSON array of the stream's chunks
    chunks = payload if type(payload) is list else [payload]
    decoder = GeminiStreamDecoder(target)
    out: list[Event] = []
    for chunk in chunks:
        if type(chunk) is not dict:
            return [StreamError(UpstreamError(ErrorCategory.PROTOCOL, "upstream body is not a JSON object"))]
        try:
            decoder.on_chunk(chunk, out)
        except (AttributeError, TypeError, ValueError) as exc:
            return [StreamError(UpstreamError(ErrorCategory.PROTOCOL, f"malformed response body: {exc}"))]
        if decoder.failed or decoder.done:
            break
    decoder.end_body(out)
    return out


def classify_error(status: int, headers: Mapping[str, str], body: bytes) -> UpstreamError:
    payload = loads_or_none(body)
    if type(payload) is list and payload:
        payload = payload[0]
    error = payload.get("error") if type(payload) is dict else None
    if error is None:
        text = body.decode("utf-8", "replace").strip() if body else ""
        error = {"message": text[:500]}
    return classify_payload(status, error, headers)


ADAPTER = Adapter(
    KIND,
    CAPABILITIES,
    encode_request,
    GeminiStreamDecoder,
    decode_response,
    classify_error,
    count=encode_count,
    count_answer=decode_count,
)
FAMILY = Family(ADAPTER, credential_header="x-goog-api-key", simulator_path="/gemini")
