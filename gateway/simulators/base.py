"""Shared machinery of the strict provider simulators: scripts, faults, verifiable continuity
tokens, request recording, SSE writing and one loopback server hosting every provider.

The simulators are an independent second implementation of each provider's rules. They work on
wire JSON only and never import the gateway's transcript, repair or provider code: a bug shared by
the code under test and the code that judges it would be invisible.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import random
import socket
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web


@dataclass
class ToolCallSpec:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass
class Reply:
    """What the simulated model answers. Each simulator renders it in its provider's format."""

    text: str = ""
    reasoning: str = ""  # emitted only when the request enables reasoning / the model reasons
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    redacted_reasoning: bool = False  # Anthropic: add a redacted_thinking block
    # OpenAI Responses, when the request offers the hosted web_search tool: search this query
    # first (a web_search_call item) and cite the page found in the answer (a url_citation)
    web_search: str | None = None
    stop: str | None = None  # None: natural (tool calls or end of turn); "length": truncated
    chunk_size: int = 12  # characters per streamed text/reasoning delta
    # the structured answer of a JSON-schema / JSON-mode request (None: one made from the schema)
    data: Any = None
    refusal: str | None = None  # the model declines with this text instead of answering
    # prompt tokens the provider reports as read from / written to its prompt cache
    cache_read: int = 0
    cache_write: int = 0


@dataclass
class Fault:
    """A failure to inject instead of (or in the middle of) a reply."""

    status: int | None = None  # answer with this HTTP status and the provider's error body
    error_type: str | None = None  # override the provider's error type / status string
    message: str | None = None
    retry_after: float | None = None  # Retry-After header (Gemini: RetryInfo in the body)
    delay: float = 0.0  # seconds to wait before the response headers
    reset_before_headers: bool = False  # drop the connection without any response
    after_events: int | None = None  # stream this many events of `reply`, then `mid_stream`
    mid_stream: str = "error"  # "error" (provider's in-stream error event) | "reset" | "stall"
    stall_seconds: float = 30.0
    reply: Reply | None = None  # what is streamed before a mid-stream fault


@dataclass
class Rejection:
    """A request the real API would refuse, with the status, type and exact message it uses."""

    status: int
    message: str
    type: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None


@dataclass
class RecordedRequest:
    path: str
    headers: Mapping[str, str]
    body: Any
    rejection: Rejection | None = None


class SimulatorState:
    """Per-provider state: the scripted answers, the recording, and the signing secret."""

    def __init__(self, kind: str, api_key: str = "sim-key", secret: bytes | None = None) -> None:
        self.kind = kind
        self.api_key = api_key
        self.secret = secret or hashlib.sha256(f"simulator-secret:{kind}".encode()).digest()
        self.script: deque[Reply | Fault] = deque()
        self.requests: list[RecordedRequest] = []
        self.default_reply: Callable[[Any], Reply] = lambda body: Reply(
            text=f"Hello from the {kind} simulator.", reasoning="Considering the request."
        )
        self.verified_tokens = 0  # real (non-placeholder) continuity tokens accepted on replay
        self.placeholder_tokens = 0  # documented placeholder signatures accepted (Gemini)
        self.quality_warnings: list[str] = []  # accepted but degrading input (e.g. non-native Kimi ids)
        self.open_streams = 0  # responses being written right now
        self.closed_early = 0  # streams whose client went away before the end
        self.frames_sent = 0  # SSE frames written, over every stream
        self.streaming: set[Any] = set()  # the connections (protocols) of the open streams
        # random failures when the script is empty: each unscripted request fails with
        # `random_fault` with probability `random_fault_rate` (seeded: runs are reproducible)
        self.random_fault: Fault | None = None
        self.random_fault_rate = 0.0
        self.random_faults = 0  # how many were injected
        self.rng = random.Random(f"simulator:{kind}")
        # every request's handler, counted by the hub: in progress now, and cancelled because
        # the client (the gateway) closed the connection (needs SimulatorHub(handler_cancellation=True))
        self.active_requests = 0
        self.cancelled_requests = 0
        # the model's context window in tokens (1 per 4 bytes of body, as usage counts them):
        # a bigger request gets the family's own overflow error (`overflow`, set by its app)
        self.context_window: int | None = None
        self.overflow: Callable[[int, int], Rejection] | None = None
        self._counter = itertools.count(1)

    def push(self, *items: Reply | Fault) -> None:
        self.script.extend(items)

    def fail_randomly(self, rate: float, fault: Fault, seed: int | str | None = None) -> None:
        """Make unscripted requests fail with `fault` with probability `rate`."""
        self.random_fault, self.random_fault_rate = fault, rate
        if seed is not None:
            self.rng.seed(seed)

    def next_item(self, body: Any) -> Reply | Fault:
        if self.script:
            return self.script.popleft()
        if self.random_fault is not None and self.rng.random() < self.random_fault_rate:
            self.random_faults += 1
            return self.random_fault
        return self.default_reply(body)

    def over_window(self, raw_len: int) -> Rejection | None:
        """The family's overflow error when a body of `raw_len` bytes exceeds the window."""
        used = raw_len // 4
        if self.context_window is None or self.overflow is None or used <= self.context_window:
            return None
        return self.overflow(used, self.context_window)

    def next_id(self) -> int:
        return next(self._counter)

    def reset(self) -> None:
        self.script.clear()
        self.requests.clear()
        self.quality_warnings.clear()
        self.verified_tokens = self.placeholder_tokens = 0
        self.random_fault, self.random_fault_rate = None, 0.0
        self.random_faults = self.cancelled_requests = 0
        self.frames_sent = 0

    @property
    def throttled_streams(self) -> int:
        """Open streams whose writes wait for their reader (the gateway) to read: the kernel's
        buffers and the transport's are full, TCP throttles them."""
        return sum(1 for protocol in self.streaming if protocol.writing_paused)

    @property
    def rejections(self) -> list[Rejection]:
        return [r.rejection for r in self.requests if r.rejection is not None]

    # -- verifiable continuity tokens --------------------------------------------------------
    def sign(self, *parts: str) -> str:
        """A token binding `parts` (model, content...) to this provider: base64 HMAC-SHA256."""
        mac = hmac.new(self.secret, "\x1f".join(parts).encode(), hashlib.sha256).digest()
        return base64.b64encode(b"sim1" + mac).decode()

    def verify(self, token: Any, *parts: str) -> bool:
        if not isinstance(token, str):
            return False
        return hmac.compare_digest(token, self.sign(*parts))


def json_response(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(payload), status=status, headers=headers, content_type="application/json"
    )


async def read_json(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


Precheck = Callable[[SimulatorState, Mapping[str, str], Any], "Rejection | None"]
Check = Callable[[SimulatorState, Any, str], "tuple[Rejection | None, int]"]


async def intake(
    request: web.Request, state: SimulatorState, precheck: Precheck, check: Check, window: bool = True
) -> tuple[Any, int, Rejection | None]:
    """Read, parse, validate and record one request: (body, raw size, rejection). Tokens that
    verified are counted only for an accepted request."""
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    rejection = precheck(state, request.headers, body)
    verified = 0
    if rejection is None:
        model = body.get("model") if isinstance(body, dict) else None
        rejection, verified = check(state, body, model if isinstance(model, str) else "")
        if window:  # a count of tokens is no generation: it has no window to exceed
            rejection = rejection or state.over_window(len(raw))
    state.requests.append(RecordedRequest(request.path, request.headers.copy(), body, rejection))
    if rejection is None:
        state.verified_tokens += verified
    return body, len(raw), rejection


def split_text(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


_RESET_BY_US = web.RequestKey("simulator_reset_connection", bool)


async def reset_connection(request: web.Request) -> web.StreamResponse:
    """Drop the TCP connection without answering (a reset before headers)."""
    transport = request.transport
    if transport is not None:
        transport.abort()
    request[_RESET_BY_US] = True  # not a client cancellation (see _activity_counter)
    raise asyncio.CancelledError()  # nothing more to write; aiohttp tears the handler down


async def stream_sse(
    request: web.Request,
    state: SimulatorState,
    frames: list[bytes],
    fault: Fault | None,
    error_frame: Callable[[Fault], bytes],
    headers: Mapping[str, str] | None = None,
) -> web.StreamResponse:
    """Write pre-rendered SSE frames, applying a mid-stream fault after `fault.after_events`."""
    response = web.StreamResponse(
        status=200, headers={"Content-Type": "text/event-stream", **(headers or {})}
    )
    await response.prepare(request)
    state.open_streams += 1
    protocol = request.protocol
    state.streaming.add(protocol)
    try:
        for n, frame in enumerate(frames):
            if fault is not None and fault.after_events is not None and n == fault.after_events:
                if fault.mid_stream == "reset":
                    if request.transport is not None:
                        request.transport.abort()
                    return response
                if fault.mid_stream == "stall":
                    await asyncio.sleep(fault.stall_seconds)
                    return response
                await response.write(error_frame(fault))
                await response.write_eof()
                return response
            await response.write(frame)
            state.frames_sent += 1
        await response.write_eof()
        return response
    except (ConnectionError, asyncio.CancelledError):  # aiohttp's "Connection lost" included
        state.closed_early += 1
        raise
    finally:
        state.open_streams -= 1
        state.streaming.discard(protocol)


def sse_frame(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, (bytes, str)) else orjson.dumps(data)
    if isinstance(payload, str):
        payload = payload.encode()
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"data: " + payload + b"\n\n"


def bearer_ok(headers: Mapping[str, str], api_key: str) -> bool:
    value = headers.get("Authorization", "")
    return hmac.compare_digest(value, f"Bearer {api_key}")


# Which sub-path of the hub each kind is served under, and the base_url a config points at.
KINDS = ("anthropic", "openai_responses", "openai_chat", "gemini", "mistral", "kimi", "deepseek")
BASE_PATHS = {
    "anthropic": "/anthropic",
    "openai_responses": "/openai_responses/v1",
    "openai_chat": "/openai_chat/v1",
    "gemini": "/gemini",
    "mistral": "/mistral/v1",
    "kimi": "/kimi/v1",
    "deepseek": "/deepseek/v1",
}


def _activity_counter(state: SimulatorState) -> Callable:
    @web.middleware
    async def count(request: web.Request, handler: Callable) -> web.StreamResponse:
        state.active_requests += 1
        try:
            return await handler(request)
        except asyncio.CancelledError:
            if not request.get(_RESET_BY_US):
                state.cancelled_requests += 1
            raise
        finally:
            state.active_requests -= 1

    return count


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class SimulatorHub:
    """Every provider simulator on one loopback server, each under its own path prefix."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str = "sim-key",
        handler_cancellation: bool = False,
    ) -> None:
        from gateway.simulators import registry  # late: registry imports every simulator module

        self.host = host
        self.port = port
        # True: a client that closes its connection cancels the handler at once, as a real
        # provider stops generating (counted in SimulatorState.cancelled_requests)
        self.handler_cancellation = handler_cancellation
        self.states: dict[str, SimulatorState] = {k: SimulatorState(k, api_key) for k in KINDS}
        self._factories = registry.APP_FACTORIES
        self._runner: web.AppRunner | None = None

    def base_url(self, kind: str) -> str:
        return f"http://{self.host}:{self.port}{BASE_PATHS[kind]}"

    def build_app(self) -> web.Application:
        root = web.Application(client_max_size=64 * 1024 * 1024)
        for kind in KINDS:
            # sub-apps route the provider's own paths ("/v1/messages", "/v1beta/models/...")
            sub = self._factories[kind](self.states[kind])
            sub.middlewares.append(_activity_counter(self.states[kind]))
            root.add_subapp("/" + kind, sub)
        return root

    async def start(self) -> SimulatorHub:
        if not self.port:
            self.port = free_port(self.host)
        self._runner = web.AppRunner(
            self.build_app(),
            handle_signals=False,
            access_log=None,
            shutdown_timeout=0.5,
            handler_cancellation=self.handler_cancellation,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SimulatorHub:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
