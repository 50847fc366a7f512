"""The attempt loop shared by every ingress: route, repair per target, send, and commit.

Nothing reaches the client before the first content (or reasoning, or tool call) delta arrives:
until then a failing target is abandoned and the next one tried at once. When every target that
can take traffic has failed, the loop backs off (jittered, honouring Retry-After and cooldowns)
and makes another pass, within the group's retry count, retry budget and deadline. After the
commit point an upstream failure ends the client's answer with a StreamError the ingress renders
in its own dialect: another target's output is never spliced in.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from gateway.config import GatewayConfig, MissingApiKey, resolve_api_key
from gateway.offload import Offload
from gateway.providers import get_adapter
from gateway.providers.base import EncodeError, HttpRequest, ProviderAdapter
from gateway.repair import Prepared, prepare
from gateway.repair.report import Repair
from gateway.routing.affinity import last_issuer, prefer_issuer
from gateway.routing.answer import Answer, Attempt, EventStream, IdMapper, mint_tool_call_id
from gateway.routing.attempt import commits, run_attempt
from gateway.routing.backoff import RetryBudget, backoff_delay
from gateway.routing.cooldown import HealthBook, Ticket
from gateway.routing.failures import AllTargetsFailed, Failure, failure_class
from gateway.routing.router import Plan, Router
from gateway.routing.sessions import CAPABILITY, COOLDOWN, UNHEALTHY, SessionMemory
from gateway.transcript.events import CONTEXT_OVERFLOW, ErrorCategory, UpstreamError
from gateway.transcript.model import Request
from gateway.transcript.model import replace as struct_replace
from gateway.transcript.target import Target
from gateway.upstream import HttpClient, Timeouts

if TYPE_CHECKING:
    from gateway.tracing import RequestTrace

__all__ = [
    "AllTargetsFailed",
    "Answer",
    "Attempt",
    "Engine",
    "Failure",
    "IdMapper",
    "commits",
    "failure_class",
    "mint_tool_call_id",
]


log = logging.getLogger("gateway")


_RETRIED = Repair("retried_after_rejection")


def _break_reason(home: Target, attempts: list[Attempt]) -> str | None:
    """Why another target served a session whose own target was tried first (None: it was not
    tried, e.g. an open tool loop went to its issuer)."""
    tried = [a for a in attempts if a.provider == home.provider]
    if not tried:
        return None
    error = tried[-1].error
    return CAPABILITY if error is not None and error.type == "encode_error" else UNHEALTHY


# (provider, group overrides) pairs whose merged timeouts are kept (config objects: a bound only
# against a caller that builds overrides per request)
_TIMEOUTS_KEPT = 1024


class Engine:
    """Routes requests over the configured targets. `clock`, `sleep` and `rng` are injectable so
    tests can observe backoff and cooldown without waiting for them."""

    def __init__(
        self,
        config: GatewayConfig,
        session: HttpClient,
        env: Mapping[str, str] | None = None,
        router: Router | None = None,
        adapters: Callable[[str], ProviderAdapter] = get_adapter,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.session = session
        self.router = router or Router(config)
        self.health = HealthBook(config, clock)
        self._env = env
        self._adapters = adapters
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._budgets: dict[str, RetryBudget] = {}
        self._timeouts: dict[tuple[str, int], tuple[object, Timeouts]] = {}  # see timeouts()
        self.sessions = SessionMemory(clock=clock)

    @property
    def env(self) -> Mapping[str, str] | None:
        """Where provider keys are read from (None: the process environment)."""
        return self._env

    def timeouts(self, target: Target, plan: Plan | None = None) -> Timeouts:
        overrides = plan.timeouts if plan is not None else None
        # decided once per provider and group overrides (config objects, alive as long as the
        # config): merging pydantic models cost a few us per request
        key = (target.provider, id(overrides))
        found = self._timeouts.get(key)
        if found is not None and found[0] is overrides:
            return found[1]
        t = self.config.providers[target.provider].timeouts
        if overrides is not None:
            t = overrides.over(t)
        timeouts = Timeouts(t.connect_seconds, t.first_token_seconds, t.idle_seconds, t.total_seconds)
        if len(self._timeouts) < _TIMEOUTS_KEPT:
            self._timeouts[key] = (overrides, timeouts)
        return timeouts

    def budget(self, plan: Plan) -> RetryBudget:
        found = self._budgets.get(plan.model)
        if found is None:
            found = self._budgets[plan.model] = RetryBudget(plan.retry.budget_ratio, plan.retry.budget_burst)
        return found

    def availability(self) -> list[tuple[str, str, Callable[[], float]]]:
        """(model group, provider, probe) for every `gateway_target_available` series: the probe
        gives 1.0 while one of the group's targets on that provider can take traffic, else 0.0."""
        pairs: dict[tuple[str, str], list[str]] = {}
        for group, targets in self.router.groups().items():
            for target in targets:
                pairs.setdefault((group, target.provider), []).append(target.model)
        health = self.health

        def probe(provider: str, models: tuple[str, ...]) -> Callable[[], float]:
            return lambda: 1.0 if any(health.is_available(provider, m) for m in models) else 0.0

        return [(group, provider, probe(provider, tuple(ms))) for (group, provider), ms in pairs.items()]

    def _session_order(
        self, request: Request, plan: Plan, session: str | None
    ) -> tuple[tuple[Target, ...], Target | None, str | None]:
        """(order, the session's target, why it is not first): the target that served the
        session's previous turn goes first while it can take traffic."""
        order = plan.targets
        if not plan.sessions or not session:
            return order, None, None
        home = self.sessions.target(plan.model, session, order) or last_issuer(order, request)
        if home is None:
            return order, None, None
        if not self.health.available(home):
            return order, home, COOLDOWN
        return (home, *(t for t in order if t is not home)), home, None

    def _order(
        self, request: Request, plan: Plan, session: str | None
    ) -> tuple[tuple[Target, ...], Target | None, str | None]:
        if len(plan.targets) < 2:
            # nothing to reorder, and a session cannot leave its only target: no transcript walk
            return plan.targets, None, None
        order, home, moved = self._session_order(request, plan, session)
        if plan.affinity:
            order = prefer_issuer(order, request)
        return order, home, moved

    def first_target(self, request: Request, plan: Plan, session: str | None = None) -> Target:
        """The target `open` would try first for this request now (the inspector's preview)."""
        order = self._order(request, plan, session)[0]
        return next((t for t in order if self.health.available(t)), order[0])

    def adapter(self, kind: str) -> ProviderAdapter:
        return self._adapters(kind)

    async def open(
        self,
        request: Request,
        plan: Plan,
        session: str | None = None,
        trace: RequestTrace | None = None,
        offload: Offload | None = None,
    ) -> Answer:
        """Try the plan's targets until one commits; raises AllTargetsFailed. `session`: the
        conversation's key, for session affinity; `trace`: the request's span when tracing is on
        (each attempt gets a span of its own); `offload`: a large request, repaired and encoded
        in a worker thread so the event loop keeps serving the others (gateway/offload.py)."""
        retry = plan.retry
        deadline = self._clock() + retry.deadline_seconds
        order, home, moved = self._order(request, plan, session)
        budget = self.budget(plan)
        budget.deposit()
        attempts: list[Attempt] = []
        final: UpstreamError | None = None
        pending = list(range(len(order)))  # this pass, in order
        retryable = set(pending)  # targets worth another pass after a backoff
        passes = 0
        while True:
            claim = self._acquire_next(order, pending)
            if claim is not None:
                index, ticket = claim
                target = order[index]
                # whether another target could follow a stalled one (only a stream's first-content
                # limit asks: a whole answer has none)
                others = request.stream and any(self.health.available(order[i]) for i in pending)
                try:
                    result = await self._serve(
                        request, plan, target, ticket, attempts, others, deadline, trace, offload
                    )
                except BaseException:
                    self.health.release(target, ticket)  # cancelled (the client went away): no verdict
                    raise
                # the target's health hears the verdict: reaching the commit point is healthy (a
                # failure after it is reported by the stream)
                if not isinstance(result, UpstreamError):
                    self.health.record(target, ticket, None)
                    stream, prepared = result
                    stream.after_commit(self._after_commit(target, ticket))
                    if plan.sessions and session:
                        if home is not None and target is not home and moved is None:
                            moved = _break_reason(home, attempts)
                        self.sessions.served(plan.model, session, target)
                    reason = moved if home is not None and target is not home else None
                    return Answer(target, prepared, tuple(attempts), stream, reason)
                self.health.record(target, ticket, result)
                final = result
                kind = failure_class(result)
                if kind is Failure.FINAL or kind is Failure.REJECTED or self._clock() >= deadline:
                    break
                if kind is Failure.NEXT:
                    retryable.discard(index)
                continue
            # every target that can take traffic now has been tried in this pass
            if final is None:
                final = self._cooling_down(plan, order)
                break
            again = [i for i in range(len(order)) if i in retryable]
            if not again or passes >= retry.max_retries:
                break
            soonest = min(self.health.available_in(order[i]) for i in again)
            delay = backoff_delay(passes, retry.backoff_base_seconds, retry.backoff_max_seconds, self._rng)
            wait = max(delay, soonest)
            if wait > retry.backoff_max_seconds or self._clock() + wait > deadline:
                if soonest > 0:  # tell the client when the first target is expected back
                    final = replace(final, retry_after=soonest)
                break
            if not budget.withdraw():
                break
            await self._sleep(wait)
            passes += 1
            pending = again
        if final.code == CONTEXT_OVERFLOW and plan.overflow is not None and plan.overflow not in order:
            result = await self._overflow(request, plan, plan.overflow, attempts, deadline, offload)
            if isinstance(result, Answer):
                return result
            final = result or final
        raise AllTargetsFailed(attempts, final)

    async def _overflow(
        self,
        request: Request,
        plan: Plan,
        target: Target,
        attempts: list[Attempt],
        deadline: float,
        offload: Offload | None,
    ) -> Answer | UpstreamError | None:
        """The group's larger-context target, once, after a context-window overflow (None: it
        cannot take traffic now, and the client hears about the overflow)."""
        ticket = self.health.acquire(target)
        if ticket is None:
            return None
        try:
            result = await self._serve(
                request, plan, target, ticket, attempts, False, deadline, None, offload
            )
        except BaseException:
            self.health.release(target, ticket)
            raise
        if isinstance(result, UpstreamError):
            self.health.record(target, ticket, result)
            return result
        self.health.record(target, ticket, None)
        stream, prepared = result
        stream.after_commit(self._after_commit(target, ticket))
        return Answer(target, prepared, tuple(attempts), stream, None)

    def _acquire_next(self, order: tuple[Target, ...], pending: list[int]) -> tuple[int, Ticket] | None:
        """The first target of this pass that can take traffic now (claiming a half-open probe if
        that is what it takes); it leaves `pending`. Cooling targets stay for the next pass."""
        for position, index in enumerate(pending):
            ticket = self.health.acquire(order[index])
            if ticket is not None:
                del pending[position]
                return index, ticket
        return None

    def _cooling_down(self, plan: Plan, order: tuple[Target, ...]) -> UpstreamError:
        """Every target is cooling down: the client is told when to come back (429 when they are
        all rate limited, else 503)."""
        limited = all(self.health.rate_limited(t) for t in order)
        return UpstreamError(
            ErrorCategory.RATE_LIMIT if limited else ErrorCategory.OVERLOADED,
            f"every target of {plan.model} is cooling down",
            type="cooling_down",
            code="targets_cooling_down",
            retry_after=min(self.health.available_in(t) for t in order),
        )

    async def _serve(
        self,
        request: Request,
        plan: Plan,
        target: Target,
        ticket: Ticket,
        attempts: list[Attempt],
        others: bool,
        deadline: float,
        trace: RequestTrace | None = None,
        offload: Offload | None = None,
    ) -> tuple[EventStream, Prepared] | UpstreamError:
        """One target: repair for it, send, and on a continuity/pairing rejection repair strictly
        and send once more (DESIGN.md 4.5) before the loop moves on."""
        adapter = self._adapters(target.kind)
        timeouts = self.timeouts(target, plan)
        # the first-content limit exists to move on to another target: the last one (or one that
        # could not be followed before the deadline anyway) is given as long as idle/total allow
        followable = others and self._clock() + timeouts.first_token < deadline
        first_token = timeouts.first_token if followable else None

        strict = False
        while True:
            if offload is not None:
                prepared = await (
                    offload.run(partial(prepare, request, target, adapter.capabilities, strict=True))
                    if strict
                    else offload.run(prepare, request, target, adapter.capabilities)
                )
            else:
                prepared = prepare(request, target, adapter.capabilities, strict=strict)
            if strict:
                prepared = struct_replace(prepared, repairs=(*prepared.repairs, _RETRIED))
            started = self._clock()
            if trace is None and offload is None:
                # awaited here with no coroutine of its own in between: every frame of the chain
                # is resumed each time the response wakes the request
                sent = self.encode(adapter, target, prepared)
                if isinstance(sent, UpstreamError):
                    result: EventStream | UpstreamError = sent
                    sent = None
                else:
                    result = await run_attempt(
                        self.session, adapter, target, prepared, sent, request.stream, timeouts, first_token
                    )
            else:
                attempt = partial(
                    self._attempt, adapter, target, prepared, request.stream, timeouts, first_token, offload
                )
                result, sent = await (
                    attempt() if trace is None else self._traced(trace, target, prepared, attempt)
                )
            attempts.append(_attempt_record(target, result, prepared, sent, started, self._clock()))
            rejected = isinstance(result, UpstreamError) and failure_class(result) is Failure.REJECTED
            if strict or not rejected:
                break
            strict = True  # a continuity / pairing rejection: repair strictly, send once more
        if isinstance(result, UpstreamError):
            return result
        return result, prepared

    def _after_commit(self, target: Target, ticket: Ticket) -> Callable[[UpstreamError], None]:
        health = self.health
        return lambda error: health.record(target, ticket, error)

    @staticmethod
    async def _traced(
        trace: RequestTrace,
        target: Target,
        prepared: Prepared,
        send: Callable[[], Awaitable[tuple[EventStream | UpstreamError, HttpRequest | None]]],
    ) -> tuple[EventStream | UpstreamError, HttpRequest | None]:
        """One attempt (`send`) inside its own span."""
        span = trace.attempt(target, prepared.request)
        try:
            outcome = await send()
        except BaseException:
            span.abandoned()
            raise
        result = outcome[0]
        if isinstance(result, UpstreamError):
            span.failed(result, prepared.repairs)
        else:
            span.committed(prepared.repairs)
            trace.committed = span
        return outcome

    async def _attempt(
        self,
        adapter: ProviderAdapter,
        target: Target,
        prepared: Prepared,
        stream: bool,
        timeouts: Timeouts,
        first_token: float | None,
        offload: Offload | None = None,
    ) -> tuple[EventStream | UpstreamError, HttpRequest | None]:
        """Encode for the target and send once; what was sent (None: nothing was)."""
        if offload is not None:
            http = await offload.run(self.encode, adapter, target, prepared)
        else:
            http = self.encode(adapter, target, prepared)
        if isinstance(http, UpstreamError):
            return http, None
        result = await run_attempt(
            self.session, adapter, target, prepared, http, stream, timeouts, first_token
        )
        return result, http

    def encode(
        self, adapter: ProviderAdapter, target: Target, prepared: Prepared
    ) -> HttpRequest | UpstreamError:
        """The HTTP request `target` gets for `prepared` (the inspector's preview encodes through
        here too, so it shows exactly what an attempt would send)."""
        if not prepared.request.messages:
            # e.g. only orphan tool results and empty text: no provider can answer nothing
            return UpstreamError(
                ErrorCategory.INVALID_REQUEST,
                "the conversation holds no message a provider can answer "
                "(only orphan tool results or empty text)",
                type="empty_transcript",
            )
        try:
            api_key = resolve_api_key(self.config, target.provider, self._env)
        except MissingApiKey as exc:
            return UpstreamError(ErrorCategory.AUTH, str(exc), type="missing_api_key")
        try:
            return adapter.encode_request(prepared.request, target, api_key)
        except EncodeError as exc:
            return UpstreamError(
                ErrorCategory.INVALID_REQUEST,
                f"cannot encode for {target.provider}: {exc}",
                type="encode_error",
            )
        except Exception:  # an encoder bug must not become a 500: another target may serve
            log.exception("encoding for %s failed", target.provider)
            return UpstreamError(
                ErrorCategory.INVALID_REQUEST,
                f"cannot encode for {target.provider}: internal encoder error",
                type="encode_error",
            )


def _attempt_record(
    target: Target,
    result: object,
    prepared: Prepared,
    sent: HttpRequest | None,
    started: float,
    ended: float,
) -> Attempt:
    error = result if isinstance(result, UpstreamError) else None
    return Attempt(
        target.provider,
        "ok" if error is None else error.category.value,
        error,
        model=target.model,
        prepared=prepared,
        sent=sent.body if sent is not None else b"",
        url=sent.url if sent is not None else "",
        started=started,
        elapsed=ended - started,
    )
