"""A committed answer: the events of one upstream response, decoded once, with provider tool-call
ids replaced by canonical ones.

`EventStream` is the one decode loop of an attempt: the attempt reads it up to the commit point
and puts what it read back (`unread`); the relay then reads the same stream on. `Answer` is what
the engine returns once a target committed: immutable facts (target, repairs, attempts, plan) and
the stream to relay.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable, Collection
from typing import TYPE_CHECKING

import orjson
from msgspec import Struct

from gateway.providers.base import StreamDecoder
from gateway.repair import Prepared
from gateway.repair.custom_tools import INPUT_FIELD
from gateway.repair.report import Repair
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    StreamError,
    UpstreamError,
)
from gateway.transcript.model import NATIVE_ID
from gateway.transcript.target import Target
from gateway.upstream import Later, Upstream, UpstreamFailure

if TYPE_CHECKING:
    pass

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_CHARS = 24
# a random byte below 248 (4 x 62) names the character of its value modulo 62: each as likely,
# as `secrets.choice` picks them; the 8 bytes from 248 up are dropped (rejection sampling)
_KEPT = len(_ALPHABET) * (256 // len(_ALPHABET))
_TO_CHAR = bytes(ord(_ALPHABET[b % len(_ALPHABET)]) for b in range(_KEPT)) + bytes(256 - _KEPT)
_DROPPED = bytes(range(_KEPT, 256))
# random bytes read per id: 24 or more of 32 survive but about once in a million draws
_DRAWN = 32


def mint_tool_call_id() -> str:
    """A canonical tool-call id: unique, unguessable, valid for OpenAI chat and Anthropic. One read
    of the OS's random source, mapped by `translate` (`secrets.choice` per character read it 24
    times, a system call and six Python calls each: ~150 calls an answer that calls a tool)."""
    while True:
        chars = secrets.token_bytes(_DRAWN).translate(_TO_CHAR, _DROPPED)
        if len(chars) >= _ID_CHARS:
            return "call_" + chars[:_ID_CHARS].decode("ascii")


class Attempt(Struct, frozen=True):  # built for every request: a Struct's init costs a fraction
    provider: str
    outcome: str  # "ok" or an ErrorCategory value
    error: UpstreamError | None = None
    # what the inspector shows of it (gateway/inspector): references the attempt already held
    model: str = ""  # the upstream model
    prepared: Prepared | None = None  # the transcript repair made for the target
    sent: bytes = b""  # the body sent upstream (empty: nothing was sent)
    url: str = ""
    started: float = 0.0  # time.monotonic() when the attempt began
    elapsed: float = 0.0  # seconds to its commit point or its failure


class IdMapper:
    """Replaces provider tool-call ids in an answer with freshly minted canonical ids, keeping the
    provider's id in the call's continuity meta so it can be replayed to its issuer."""

    __slots__ = ("_target", "_native")

    def __init__(self, target: Target) -> None:
        self._target = target
        self._native: dict[int, str] = {}

    def all(self, events: list[Event]) -> list[Event]:
        """`events` mapped: the list itself when none needs it (nearly every batch, and every
        answer without a tool call), no call per event."""
        native = self._native
        for at, event in enumerate(events):
            t = type(event)
            if (t is BlockStart and event.kind is BlockKind.TOOL_CALL) or (t is BlockStop and native):
                return events[:at] + [self(e) for e in events[at:]]
        return events

    def __call__(self, event: Event) -> Event:
        t = type(event)
        if t is BlockStart and event.kind is BlockKind.TOOL_CALL:
            self._native[event.index] = event.id
            return BlockStart(event.index, event.kind, mint_tool_call_id(), event.name, event.custom)
        if t is BlockStop and event.index in self._native:
            native = self._native.pop(event.index)
            if native:
                data = {**(event.meta.data if event.meta is not None else {}), NATIVE_ID: native}
                return BlockStop(event.index, self._target.continuity(data))
        return event


class CustomCallMapper:
    """Calls of the custom tools a target took in function form (gateway.repair.custom_tools)
    back to custom calls: marked custom, and their arguments `{"input": text}` become the raw text,
    delivered whole when the call ends (the JSON string can only be decoded once complete)."""

    __slots__ = ("_names", "_open")

    def __init__(self, names: Collection[str]) -> None:
        self._names = names
        self._open: dict[int, list[str]] = {}

    def __call__(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            t = type(event)
            if t is BlockStart and event.kind is BlockKind.TOOL_CALL and event.name in self._names:
                self._open[event.index] = []
                out.append(BlockStart(event.index, event.kind, event.id, event.name, True))
            elif t is BlockDelta and event.index in self._open:
                self._open[event.index].append(event.text)
            elif t is BlockStop and event.index in self._open:
                text = raw_input("".join(self._open.pop(event.index)))
                if text:
                    out.append(BlockDelta(event.index, text))
                out.append(event)
            else:
                out.append(event)
        return out


def raw_input(arguments: str) -> str:
    """The text of a custom call from its function form; arguments that do not follow the form are
    passed on as they are (the client sees what the model wrote)."""
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(INPUT_FIELD), str):
        return value[INPUT_FIELD]
    return arguments


class EventStream:
    """The canonical events of one upstream response, one batch per upstream chunk (callers
    write once per batch). `next_batch` returns None at the end; a broken or truncated upstream
    ends with a StreamError. `aclose` releases the upstream connection (closing it, which stops
    the provider, when the body was not read to the end) and is safe to call more than once."""

    __slots__ = (
        "_upstream",
        "_decoder",
        "_mapper",
        "_custom",
        "_pending",
        "_ended",
        "error",
        "_on_failure",
    )

    def __init__(
        self,
        mapper: IdMapper,
        upstream: Upstream | None = None,
        decoder: StreamDecoder | None = None,
        events: list[Event] | None = None,
        custom: CustomCallMapper | None = None,
    ) -> None:
        self._upstream = upstream  # its bytes taken as they are in (`Upstream.take`)
        self._decoder = decoder
        self._mapper = mapper
        self._custom = custom
        # a whole (non-streamed) answer is one batch, decoded by the caller
        self._pending: list[list[Event]] = [self._map(events)] if events is not None else []
        self._ended = upstream is None
        # the upstream failure that ended the answer after the commit point, if any: such an
        # answer is incomplete (its last reasoning block may be cut short) and is never recorded
        self.error: UpstreamError | None = None
        self._on_failure: Callable[[UpstreamError], None] | None = None

    def unread(self, events: list[Event]) -> None:
        """Put events read before the commit point back: they are the next batch."""
        if events:
            self._pending.insert(0, events)

    def after_commit(self, on_failure: Callable[[UpstreamError], None]) -> None:
        """From now on a StreamError is a failure after the commit point: `on_failure` hears it."""
        self._on_failure = on_failure

    def ready(self) -> bool:
        """Whether `next_batch` has a batch without waiting for the upstream."""
        return bool(self._pending)

    def drained(self) -> bool:
        """Whether the upstream's answer is in whole and read: what is left of the stream (the
        batches put back, the decoder's end) comes without waiting for the upstream."""
        return self._upstream is None or self._upstream.drained()

    async def next_batch(self) -> list[Event] | None:
        """The next batch, waiting for the upstream if need be (`poll`); None at the end."""
        while type(batch := self.poll()) is not list and batch is not None:
            await batch
        return batch

    def poll(self) -> list[Event] | asyncio.Future[None] | Later | None:
        """The next batch without waiting: what was put back, else the events of every upstream
        byte already in (one decode of all of it); None at the end; or, when nothing is in yet,
        the upstream connection's future to await before polling again (LATER while pushed:
        `on_arrival`). The relay's loop awaits
        that future itself: one wake-up per upstream arrival and no coroutine between it and the
        socket's reader (each await layer is paid again at every wake-up)."""
        if self._pending:
            return self._watch(self._pending.pop(0))
        if self._ended:
            return None
        decoder, upstream = self._decoder, self._upstream
        assert upstream is not None and decoder is not None
        try:
            chunk = upstream.take()
            if type(chunk) is not bytes:
                return chunk
            if not chunk:
                self._ended = True
                events = decoder.finish()
            else:
                events = decoder.feed(chunk)
                # nearly every chunk: one delta, which is never mapped nor an error
                if len(events) == 1 and type(events[0]) is BlockDelta and self._custom is None:
                    return events
        except UpstreamFailure as failure:
            self._ended = True
            events = [StreamError(failure.error)]
        return self._watch(self._map(events))

    def on_arrival(self, sink: Callable[[], object] | None) -> None:
        """Have the upstream call `sink` at each arrival instead of waking the future `poll`
        handed out (`Upstream.on_arrival`): a relay then polls from there; None: back to
        futures. Nothing once the stream was released."""
        if self._upstream is not None:
            self._upstream.on_arrival(sink)

    def _map(self, events: list[Event]) -> list[Event]:
        if self._custom is not None:
            events = self._custom(events)
        return self._mapper.all(events)

    def _watch(self, events: list[Event]) -> list[Event]:
        if self._on_failure is not None:
            for event in events:
                if type(event) is StreamError and self.error is None:
                    self.error = event.error
                    self._on_failure(event.error)
        return events

    async def aclose(self) -> None:
        upstream, self._upstream = self._upstream, None
        self._ended = True
        if upstream is not None:
            await upstream.__aexit__(None, None, None)


class Answer(Struct, frozen=True):
    """A target committed. Read `stream` (or iterate `batches()`/`events()`) once; `aclose()`
    releases the upstream connection."""

    target: Target
    prepared: Prepared
    attempts: tuple[Attempt, ...]
    stream: EventStream
    # why the session left the target that served its previous turn (routing.sessions), if it did
    affinity_break: str | None = None

    @property
    def repairs(self) -> tuple[Repair, ...]:
        return self.prepared.repairs

    @property
    def error(self) -> UpstreamError | None:
        """The failure that ended the answer after the commit point, if any."""
        return self.stream.error

    async def batches(self) -> AsyncIterator[list[Event]]:
        stream = self.stream
        try:
            while (batch := await stream.next_batch()) is not None:
                if batch:
                    yield batch
        finally:
            await stream.aclose()

    async def events(self) -> AsyncIterator[Event]:
        async for batch in self.batches():
            for event in batch:
                yield event

    async def aclose(self) -> None:
        await self.stream.aclose()
