"""The contract every provider module implements, and helpers shared by all of them.

A provider module turns a canonical Request into one HTTP request for its API, and turns the
answer (streamed or not) back into canonical events. It is sans-IO: `upstream.py` does the HTTP.
Shared helpers here never branch on provider kind; quirks live in the provider's own module.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import orjson
from msgspec import Struct

from gateway.bounded_cache import BoundedCache
from gateway.sse import DEFAULT_MAX_LINE, SSELineTooLong, SSEParser
from gateway.transcript.events import CONTEXT_OVERFLOW, ErrorCategory, Event, StreamError, UpstreamError
from gateway.transcript.model import Document, Request, ToolCall, ToolKind
from gateway.transcript.target import Capabilities, Target


class EncodeError(ValueError):
    """The canonical request holds something this provider cannot express. Repair should have
    prevented it; raising beats silently dropping content."""


class HttpRequest(Struct, frozen=True):  # one a request: a Struct's init costs a fraction
    url: str
    headers: Mapping[str, str]
    body: bytes


class StreamDecoder(Protocol):
    """Per-request sans-IO state machine: bytes of the upstream body in, canonical events out."""

    def feed(self, chunk: bytes) -> list[Event]: ...

    def finish(self) -> list[Event]:
        """End of the upstream body. A stream that ended before the provider's terminal event
        yields a StreamError here."""
        ...


class ProviderAdapter(Protocol):
    kind: str
    capabilities: Capabilities

    def encode_request(self, request: Request, target: Target, api_key: str) -> HttpRequest:
        """`request.stream` selects the streaming endpoint/format. Tool-call ids in `request` are
        already projected to this provider's format; continuity meta reaching here is the
        target's own (repair filtered the rest)."""
        ...

    def stream_decoder(self, target: Target, request: Request | None = None) -> StreamDecoder:
        """`request`: what was sent (as encode_request received it), for decoders whose reading
        of the answer depends on it (e.g. a structured output requested through a forced tool)."""
        ...

    def decode_response(self, body: bytes, target: Target, request: Request | None = None) -> list[Event]:
        """A non-streaming body as the same events a stream would have produced."""
        ...

    def classify_error(self, status: int, headers: Mapping[str, str], body: bytes) -> UpstreamError: ...


@dataclass(frozen=True, slots=True)
class Adapter:
    """A ProviderAdapter assembled from a provider module's functions (no per-module class)."""

    kind: str
    capabilities: Capabilities
    encode: Callable[[Request, Target, str], HttpRequest]
    decoder: Callable[[Target, Request | None], StreamDecoder]
    decode: Callable[[bytes, Target, Request | None], list[Event]]
    classify: Callable[[int, Mapping[str, str], bytes], UpstreamError]
    # the provider's own token counter, where the family has one: the request to send, and the
    # input tokens read from its answer (None: the answer did not say)
    count: Callable[[Request, Target, str], HttpRequest] | None = None
    count_answer: Callable[[bytes], int | None] | None = None

    def encode_request(self, request: Request, target: Target, api_key: str) -> HttpRequest:
        return self.encode(request, target, api_key)

    def stream_decoder(self, target: Target, request: Request | None = None) -> StreamDecoder:
        return self.decoder(target, request)

    def decode_response(self, body: bytes, target: Target, request: Request | None = None) -> list[Event]:
        return self.decode(body, target, request)

    def classify_error(self, status: int, headers: Mapping[str, str], body: bytes) -> UpstreamError:
        return self.classify(status, headers, body)


@dataclass(frozen=True, slots=True)
class KeyEcho:
    """How the family's API keys look when its error messages quote one (`pattern`), and what
    stands for a quoted key in the message the gateway keeps (`mask`)."""

    pattern: re.Pattern[str]
    mask: str

    def redact(self, message: str) -> str:
        return self.pattern.sub(self.mask, message)


@dataclass(frozen=True, slots=True)
class Family:
    """One provider family: everything the gateway knows of it, in one record. The registry
    (gateway/providers/__init__.py) lists the records; config validation, the engine, the upstream
    header allow-list, the demo and the tests all take the list of kinds from there."""

    adapter: ProviderAdapter  # encoding, decoding, error classification; its capabilities (the
    # family's quirks as data, its model-name rule among them)
    # where the provider key travels: "authorization" (as "Bearer <key>") or the family's own header
    credential_header: str
    # the hub path of its simulator (gateway/simulators): `[server] simulators_url` + this is the
    # family's base_url. The simulators keep their own table (they are independent judges); a test
    # holds the two equal
    simulator_path: str
    # every other request header its adapter may set (beyond content-type and accept)
    headers: tuple[str, ...] = ()
    # its keys as its error messages quote them: none leaves the family's module unmasked
    key_echo: KeyEcho | None = None

    @property
    def kind(self) -> str:
        return self.adapter.kind

    @property
    def capabilities(self) -> Capabilities:
        return self.adapter.capabilities

    def upstream_headers(self) -> frozenset[str]:
        """The request headers of this family's calls, lowercased (content type and accept included)."""
        return frozenset(h.lower() for h in ("content-type", "accept", self.credential_header, *self.headers))


def document_text(document: Document) -> str | None:
    """A plain-text document as text a model reads (for APIs without document inputs), None for
    any other document."""
    if document.media_type != "text/plain" or not document.source.startswith("data:"):
        return None
    _, sep, data = document.source.partition(",")
    try:
        text = base64.b64decode(data, validate=True).decode() if sep else None
    except (binascii.Error, UnicodeDecodeError):
        raise EncodeError("a text/plain document must be base64 of UTF-8 text") from None
    if text is None:
        raise EncodeError("a text/plain document must be a base64 data URL")
    title = f' title="{document.title}"' if document.title else ""
    return f"<document{title}>\n{text}\n</document>"


def join_url(base_url: str, path: str) -> str:
    """One string per base and path, made once: every request's own copy would be kept alive with
    its capture by the inspector (gateway/inspector)."""
    key = (base_url, path)
    url = _URLS.get(key)
    if url is None:
        url = _URLS.keep(key, base_url.rstrip("/") + path)
    return url


# paths may name a client-chosen model: bounded
_URLS: BoundedCache[tuple[str, str], str] = BoundedCache(1024)


def hosted_tool_specs(request: Request, kind: str) -> list[dict[str, object]]:
    """The wire objects of the hosted tools a provider of `kind` runs. Repair left out the optional
    ones of other kinds; one that is still here and hosted elsewhere was required: this provider
    cannot serve the request (another target may)."""
    out: list[dict[str, object]] = []
    for tool in request.hosted_tools:
        if tool.kind != kind:
            raise EncodeError(f"the hosted tool {tool.type!r} runs only on {tool.kind} targets")
        out.append(dict(tool.spec))
    return out


def function_tools_only(request: Request, kind: str) -> None:
    """For providers that take function tools only (no custom tools, no hosted tools of their own
    in this gateway): anything else reaching the encoder is a repair bug, refused explicitly."""
    if hosted_tool_specs(request, kind):
        raise EncodeError(f"{kind} targets run no hosted tools")
    for tool in request.tools:
        if tool.kind is not ToolKind.FUNCTION:
            raise EncodeError(f"tool {tool.name!r}: custom (freeform) tools must be mapped to function tools")


def tool_call_names(request: Request) -> dict[str, str]:
    """Tool-call id -> function name over the whole transcript (results that need the name)."""
    names: dict[str, str] = {}
    for message in request.messages:
        for block in message.blocks:
            if type(block) is ToolCall:
                names[block.id] = block.name
    return names


def parse_arguments(arguments: str) -> object:
    """A tool call's raw JSON arguments as an object, for APIs that take objects. Invalid JSON is
    an explicit error (sending `{}` instead would silently change what the call did)."""
    if not arguments.strip():
        return {}
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError as exc:
        raise EncodeError(f"tool call arguments are not valid JSON: {exc}") from None


def loads_or_none(body: bytes | str) -> object | None:
    try:
        return orjson.loads(body)
    except (orjson.JSONDecodeError, TypeError):
        return None


def retry_after_header(headers: Mapping[str, str]) -> float | None:
    """Seconds from a `Retry-After` (delta-seconds form) or `retry-after-ms` header."""
    ms = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            return None  # HTTP-date form: treated as unknown; routing backs off by itself
    return None


def overflow_code(message: str, code: str | None, markers: tuple[str, ...]) -> str | None:
    """`code`, or CONTEXT_OVERFLOW when the provider's message says the prompt exceeded the
    context window (`markers`: lower-case fragments of the provider's own wording)."""
    lowered = message.lower()
    return CONTEXT_OVERFLOW if any(m in lowered for m in markers) else code


def category_for_status(status: int) -> ErrorCategory:
    """Default classification by HTTP status, for bodies a provider module does not recognise."""
    if status == 400 or status == 422:
        return ErrorCategory.INVALID_REQUEST
    if status == 401:
        return ErrorCategory.AUTH
    if status == 403:
        return ErrorCategory.PERMISSION
    if status == 404:
        return ErrorCategory.NOT_FOUND
    if status == 408:
        return ErrorCategory.TIMEOUT
    if status == 413:
        return ErrorCategory.TOO_LARGE
    if status == 429:
        return ErrorCategory.RATE_LIMIT
    if status == 529 or status == 503:
        return ErrorCategory.OVERLOADED
    if status == 409 or status >= 500:
        return ErrorCategory.SERVER
    return ErrorCategory.INVALID_REQUEST


class SSEStreamDecoder:
    """Base for SSE-speaking providers: frames the bytes, hands each event to `on_event`, and
    reports a stream that ended before `self.done` was set as a truncated stream."""

    def __init__(self, target: Target, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.target = target
        self.done = False  # set by the subclass when the provider's terminal event arrived
        self.failed = False  # set once a StreamError has been emitted
        self._sse = SSEParser(max_line)

    def feed(self, chunk: bytes) -> list[Event]:
        out: list[Event] = []
        if not self.failed:
            sse = self._sse
            data = sse.one_data(chunk)
            if data is not None:  # nearly every chunk: one data event, its bytes not decoded here
                self.on_data(data, out)
                return out
            # several whole events (a stream's first read and its last, often): each unnamed
            # one's bytes to `on_data` too
            whole = sse.whole_frames(chunk)
            if whole is not None:
                for name, raw in whole:
                    if self.failed:
                        break
                    if name:
                        self.on_event(name, raw.decode("utf-8", "replace"), out)
                    else:
                        self.on_data(raw, out)
                return out
        try:
            frames = self._sse.feed(chunk)
        except SSELineTooLong as exc:
            return self._fail(out, ErrorCategory.PROTOCOL, str(exc))
        for name, data in frames:
            if self.failed:
                break
            self.on_event(name, data, out)
        return out

    def finish(self) -> list[Event]:
        out: list[Event] = []
        if not self.failed:
            for name, data in self._sse.finish():
                self.on_event(name, data, out)
        if not self.done and not self.failed:
            self.on_truncated(out)
        return out

    def on_event(self, name: str, data: str, out: list[Event]) -> None:  # pragma: no cover
        raise NotImplementedError

    def on_data(self, data: bytes, out: list[Event]) -> None:
        """An unnamed event's data as the upstream's bytes: what `on_event("", data decoded)`
        does. A decoder that parses bytes overrides it (one UTF-8 decode less per chunk); any
        bytes it does not take as they are (invalid UTF-8 among them) go to `on_event`."""
        self.on_event("", data.decode("utf-8", "replace"), out)

    def on_truncated(self, out: list[Event]) -> None:
        self._fail(out, ErrorCategory.CONNECTION, "upstream stream ended before the response completed")

    def _fail(self, out: list[Event], category: ErrorCategory, message: str, **kw) -> list[Event]:
        if not self.failed:
            self.failed = True
            out.append(StreamError(UpstreamError(category, message, **kw)))
        return out
