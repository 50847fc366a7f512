"""A committed answer: the events buffered up to the commit point plus the rest of the upstream
stream, with provider tool-call ids replaced by canonical ones."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.providers.base import StreamDecoder
from gateway.repair import Prepared
from gateway.repair.report import Repair
from gateway.transcript.events import (
    BlockKind,
    BlockStart,
    BlockStop,
    Event,
    StreamError,
    UpstreamError,
)
from gateway.transcript.model import NATIVE_ID
from gateway.transcript.target import Target
from gateway.upstream import Upstream, UpstreamFailure

if TYPE_CHECKING:
    from gateway.routing.router import Plan

_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mint_tool_call_id() -> str:
    """A canonical tool-call id: unique, unguessable, valid for OpenAI chat and Anthropic."""
    return "call_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


@dataclass(slots=True)
class Attempt:
    provider: str
    outcome: str  # "ok" or an ErrorCategory value
    error: UpstreamError | None = None


class IdMapper:
    """Replaces provider tool-call ids in an answer with freshly minted canonical ids, keeping the
    provider's id in the call's continuity meta so it can be replayed to its issuer."""

    __slots__ = ("_target", "_native")

    def __init__(self, target: Target) -> None:
        self._target = target
        self._native: dict[int, str] = {}

    def __call__(self, event: Event) -> Event:
        t = type(event)
        if t is BlockStart and event.kind is BlockKind.TOOL_CALL:
            self._native[event.index] = event.id
            return BlockStart(event.index, event.kind, mint_tool_call_id(), event.name)
        if t is BlockStop and event.index in self._native:
            native = self._native.pop(event.index)
            if native:
                data = {**(event.meta.data if event.meta is not None else {}), NATIVE_ID: native}
                return BlockStop(event.index, self._target.continuity(data))
        return event


class Answer:
    """A committed answer. Iterate `batches()` (or `events()`) once; `aclose()` releases the
    upstream connection (closing it, which stops the provider, if the body was not read to the
    end) and is safe to call more than once."""

    def __init__(
        self,
        target: Target,
        prepared: Prepared,
        buffered: list[Event],
        upstream: Upstream | None = None,
        chunks: AsyncIterator[bytes] | None = None,
        decoder: StreamDecoder | None = None,
        mapper: IdMapper | None = None,
        on_failure: Callable[[UpstreamError], None] | None = None,
    ) -> None:
        self.target = target
        self.prepared = prepared
        self.attempts: list[Attempt] = []
        self.plan: Plan | None = None
        # the upstream failure that ended the answer after the commit point, if any: such an
        # answer is incomplete (its last reasoning block may be cut short) and is never recorded
        self.error: UpstreamError | None = None
        self._buffered = buffered
        self._upstream = upstream
        self._chunks = chunks
        self._decoder = decoder
        self._mapper = mapper
        self._on_failure = on_failure

    @property
    def repairs(self) -> tuple[Repair, ...]:
        return self.prepared.repairs

    async def batches(self) -> AsyncIterator[list[Event]]:
        """The answer's events, one list per upstream chunk (callers write once per batch)."""
        try:
            if self._buffered:
                self._watch(self._buffered)
                yield self._buffered
            self._buffered = []
            if self._chunks is None or self._decoder is None or self._mapper is None:
                return
            decoder = self._decoder
            try:
                async for chunk in self._chunks:
                    events = decoder.feed(chunk)
                    if events:
                        yield self._mapped(events)
                events = decoder.finish()
            except UpstreamFailure as failure:
                events = [StreamError(failure.error)]
            if events:
                yield self._mapped(events)
        finally:
            await self.aclose()

    def _mapped(self, events: list[Event]) -> list[Event]:
        mapper = self._mapper
        assert mapper is not None
        out = [mapper(e) for e in events]
        self._watch(out)
        return out

    def _watch(self, events: list[Event]) -> None:
        for event in events:
            if type(event) is StreamError and self.error is None:
                self.error = event.error
                if self._on_failure is not None:
                    self._on_failure(event.error)

    async def events(self) -> AsyncIterator[Event]:
        async for batch in self.batches():
            for event in batch:
                yield event

    async def aclose(self) -> None:
        chunks, self._chunks = self._chunks, None
        upstream, self._upstream = self._upstream, None
        try:
            if chunks is not None and hasattr(chunks, "aclose"):
                try:
                    await chunks.aclose()
                except RuntimeError:  # being iterated right now by another task: it ends with the close
                    pass
        finally:
            if upstream is not None:
                await upstream.__aexit__(None, None, None)
