"""The attempt loop shared by every ingress: route, repair per target, send, and commit.

Nothing reaches the client before the first content (or reasoning, or tool call) delta arrives:
until then a failing target is abandoned and the next one tried. After it, an upstream failure
ends the client's answer with a StreamError the ingress renders in its own dialect.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

import aiohttp

from gateway.config import GatewayConfig, MissingApiKey, resolve_api_key
from gateway.providers import get_adapter
from gateway.providers.base import EncodeError, ProviderAdapter, StreamDecoder
from gateway.repair import Prepared, prepare
from gateway.repair.report import Repair
from gateway.routing.router import Plan, Router
from gateway.transcript.events import (
    BlockDelta,
    BlockKind,
    BlockStart,
    BlockStop,
    ErrorCategory,
    Event,
    Finish,
    StreamError,
    UpstreamError,
)
from gateway.transcript.model import NATIVE_ID, Request
from gateway.transcript.target import Target
from gateway.upstream import MAX_ERROR_BODY, Timeouts, Upstream, UpstreamFailure

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


def _commits(event: Event) -> bool:
    t = type(event)
    if t is BlockDelta:
        return bool(event.text)
    return (t is BlockStart and event.kind is BlockKind.TOOL_CALL) or t is Finish


class Answer:
    """A committed answer: the events seen so far plus the rest of the upstream stream."""

    def __init__(
        self,
        target: Target,
        prepared: Prepared,
        buffered: list[Event],
        upstream: Upstream | None = None,
        chunks: AsyncIterator[bytes] | None = None,
        decoder: StreamDecoder | None = None,
        mapper: IdMapper | None = None,
    ) -> None:
        self.target = target
        self.prepared = prepared
        self.attempts: list[Attempt] = []
        self.plan: Plan | None = None
        self._buffered = buffered
        self._upstream = upstream
        self._chunks = chunks
        self._decoder = decoder
        self._mapper = mapper

    @property
    def repairs(self) -> tuple[Repair, ...]:
        return self.prepared.repairs

    async def batches(self) -> AsyncIterator[list[Event]]:
        """The answer's events, one list per upstream chunk (callers write once per batch)."""
        try:
            if self._buffered:
                yield self._buffered
            self._buffered = []
            if self._chunks is None or self._decoder is None or self._mapper is None:
                return
            decoder, mapper = self._decoder, self._mapper
            try:
                async for chunk in self._chunks:
                    events = decoder.feed(chunk)
                    if events:
                        yield [mapper(e) for e in events]
                events = decoder.finish()
            except UpstreamFailure as failure:
                events = [StreamError(failure.error)]
            if events:
                yield [mapper(e) for e in events]
        finally:
            await self.aclose()

    async def events(self) -> AsyncIterator[Event]:
        async for batch in self.batches():
            for event in batch:
                yield event

    async def aclose(self) -> None:
        upstream, self._upstream = self._upstream, None
        if upstream is not None:
            await upstream.__aexit__(None, None, None)


class AllTargetsFailed(Exception):
    def __init__(self, plan: Plan, attempts: list[Attempt], final: UpstreamError) -> None:
        super().__init__(final.message)
        self.plan = plan
        self.attempts = attempts
        self.final = final


class Engine:
    def __init__(
        self,
        config: GatewayConfig,
        session: aiohttp.ClientSession,
        env: Mapping[str, str] | None = None,
        router: Router | None = None,
        adapters: Callable[[str], ProviderAdapter] = get_adapter,
    ) -> None:
        self.config = config
        self.session = session
        self.router = router or Router(config)
        self._env = env
        self._adapters = adapters

    def timeouts(self, target: Target) -> Timeouts:
        t = self.config.providers[target.provider].timeouts
        return Timeouts(t.connect_seconds, t.first_token_seconds, t.idle_seconds, t.total_seconds)

    async def open(self, request: Request, plan: Plan) -> Answer:
        """Try the plan's targets in order until one commits; raises AllTargetsFailed."""
        attempts: list[Attempt] = []
        final: UpstreamError | None = None
        for target in plan.targets:
            adapter = self._adapters(target.kind)
            prepared = prepare(request, target, adapter.capabilities)
            result = await self._attempt(adapter, target, prepared, request.stream)
            if isinstance(result, Answer):
                attempts.append(Attempt(target.provider, "ok"))
                result.attempts = attempts
                result.plan = plan
                return result
            attempts.append(Attempt(target.provider, result.category.value, result))
            final = result
            if not (
                result.retryable
                or result.category in _NEXT_TARGET_CATEGORIES
                or result.type == "encode_error"
            ):
                break
        assert final is not None, "a plan always has at least one target"
        raise AllTargetsFailed(plan, attempts, final)

    async def _attempt(
        self, adapter: ProviderAdapter, target: Target, prepared: Prepared, stream: bool
    ) -> Answer | UpstreamError:
        try:
            api_key = resolve_api_key(self.config, target.provider, self._env)
        except MissingApiKey as exc:
            return UpstreamError(ErrorCategory.AUTH, str(exc), type="missing_api_key")
        try:
            http = adapter.encode_request(prepared.request, target, api_key)
        except EncodeError as exc:
            return UpstreamError(
                ErrorCategory.INVALID_REQUEST,
                f"cannot encode for {target.provider}: {exc}",
                type="encode_error",
            )
        timeouts = self.timeouts(target)
        upstream = Upstream(self.session, http, timeouts)
        try:
            await upstream.__aenter__()
        except UpstreamFailure as failure:
            return failure.error
        handed_over = False
        try:
            if upstream.status != 200:
                body = await upstream.read(MAX_ERROR_BODY)
                return adapter.classify_error(upstream.status, upstream.headers, body)
            mapper = IdMapper(target)
            if not stream:
                body = await upstream.read()
                try:
                    events = [mapper(e) for e in adapter.decode_response(body, target)]
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    return UpstreamError(
                        ErrorCategory.PROTOCOL, f"unreadable answer from {target.provider}: {exc}"
                    )
                errors = [e for e in events if type(e) is StreamError]
                if errors:
                    return errors[0].error
                return Answer(target, prepared, events)
            decoder = adapter.stream_decoder(target)
            chunks = upstream.chunks()
            buffered: list[Event] = []
            committed = ended = False
            async with asyncio.timeout_at(asyncio.get_running_loop().time() + timeouts.first_token):
                while not committed and not ended:
                    chunk = await anext(chunks, None)
                    if chunk is None:
                        ended = True
                        events = decoder.finish()
                    else:
                        events = decoder.feed(chunk)
                    for event in events:
                        if type(event) is StreamError and not committed:
                            return event.error
                        event = mapper(event)
                        buffered.append(event)
                        committed = committed or _commits(event)
            answer = Answer(target, prepared, buffered, upstream, None if ended else chunks, decoder, mapper)
            handed_over = True
            return answer
        except UpstreamFailure as failure:
            return failure.error
        except TimeoutError:
            return UpstreamError(
                ErrorCategory.TIMEOUT, f"no content from {target.provider} within {timeouts.first_token:g}s"
            )
        finally:
            if not handed_over:
                await upstream.__aexit__(None, None, None)


# not retryable on the same target, but another target may well serve the request
_NEXT_TARGET_CATEGORIES = frozenset(
    {ErrorCategory.AUTH, ErrorCategory.PERMISSION, ErrorCategory.QUOTA, ErrorCategory.NOT_FOUND}
)
