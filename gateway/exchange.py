"""The exchange: one client request, whatever dialect carried it.

    decode (codec) -> plan -> session -> restore continuity -> route and attempt (engine: repair
    per target, the commit point) -> relay events to the codec's encoder -> record the turn ->
    observe (metrics, access log)

Every ingress dialect and both the streamed and the whole answer run this one pipeline; a dialect
is its record and codecs (gateway/ingress/base.py). `Exchange` carries one request's working state
from step to step, and what it learned on its way: the request's metrics/access-log record is
built from it once, when it ends.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway import books
from gateway.access_log import session_hash
from gateway.answering import answer_stream, answer_whole
from gateway.continuity import chain
from gateway.continuity.items import expand
from gateway.continuity.restore import keyed, restore
from gateway.ingress.admission import check_size, parse_counted, parse_short, values_within_budget
from gateway.ingress.base import Dialect, Inbound, IngressCodec, Reply, SessionHint
from gateway.ingress.budget import Shared, offloads
from gateway.ingress.errors import ClientError, invalid, overflow_figures
from gateway.ingress.memo import Items
from gateway.ingress.split import parse_shared
from gateway.metrics import NO_PROVIDER, AttemptOutcome, RequestRecord, new_request_id
from gateway.offload import OFFLOAD_BLOCKS, Offload
from gateway.repair.report import Repair
from gateway.routing.engine import AllTargetsFailed, Answer, Attempt
from gateway.routing.router import UNKNOWN_MODEL, InvalidModelName, Plan, UnknownModel
from gateway.session import derive_session_key, valid_session_id
from gateway.state import TENANT, GatewayState
from gateway.transcript.estimate import estimate_input_tokens
from gateway.transcript.events import (
    CONTEXT_OVERFLOW,
    ErrorCategory,
    Event,
    UpstreamError,
    is_first_content,
)
from gateway.transcript.model import AssistantTurn, Request, Usage, replace

if TYPE_CHECKING:
    from gateway.tracing import RequestTrace

log = logging.getLogger("gateway")

# on every answer of the API, errors included: the request's id in the inspector (/inspector)
REQUEST_ID_HEADER = "X-Gateway-Request-Id"


@dataclass(slots=True)
class Exchange:
    """One request on its way through the pipeline: what it carries (the HTTP request, its
    dialect and codec), its working state as each step fills it in (inbound, plan, answer, reply,
    headers), and what it learned for the request's metrics/access-log record."""

    state: GatewayState
    dialect: Dialect
    codec: IngressCodec
    http: web.Request
    request_id: str = field(default_factory=new_request_id)
    started: float = field(default_factory=time.monotonic)
    # -- working state, in pipeline order --
    inbound: Inbound | None = None
    request: Request | None = None  # the canonical request as routed (history, restored continuity)
    plan: Plan | None = None
    answer: Answer | None = None
    reply: Reply | None = None
    headers: dict[str, str] = field(default_factory=dict)  # the gateway's own response headers
    # -- what the request's record says --
    model: str = UNKNOWN_MODEL  # label-safe: a config name
    session: str = ""
    tenant: str = ""
    ignored_tokens: int = 0
    restored: tuple[Repair, ...] = ()
    attempts: tuple[Attempt, ...] = ()  # when no target committed
    outcome: str = "ok"
    status: int = 0
    ttft: float | None = None
    usage: Usage | None = None
    kept: chain.Kept | None = None  # the kept conversation this request continues
    # the assistant turns of the routed request (the position its answer takes), counted by
    # restore's keys: not walked again over a long transcript's messages when the answer is recorded
    assistants: int = 0
    turn: AssistantTurn | None = None  # the answer, once it completed
    key: str = ""  # the named client key (gateway/limits.py)
    key_refusal: str = ""
    trace: RequestTrace | None = None  # the request's span, when tracing is on
    cost_usd: float | None = None  # what the answer cost, once accounted for (GatewayState.observe)
    # what the inspector keeps of it (gateway/inspector): references to what the request made anyway
    raw: bytes = b""  # the body as received
    # a large body as parsed, unused once decoded: held so that it is freed with the exchange by
    # its bookkeeping (in the loop's next pass, after the answer's write: gateway/books.py), not
    # on the answer's way as `_run` returns (a cold 1,000-message body's parse takes ~0.2-0.4 ms
    # to free: bench/cold_path.py); a smaller one, whose bookkeeping may be held, goes at once
    parsed: Any = None
    received: Request | None = None  # the client's transcript, decoded (kept history prepended)
    routed: Request | None = None  # ... with recorded continuity restored: what was routed
    error: str = ""  # the client's error message, or the stream's
    # a large body: its parse, decode, repair and encode run in a worker thread (gateway/offload.py)
    offload: Offload | None = None

    def saw(self, event: Event) -> None:
        """An event on its way to the client: the first content (`is_first_content`) sets the
        time to first token."""
        if self.ttft is None and is_first_content(event):
            self.ttft = time.monotonic() - self.started

    def record(self, ended: float | None = None) -> RequestRecord:
        """`ended`: the request's end on the monotonic clock (default: now), for a record built
        after the answer went out."""
        answer, trace = self.answer, self.trace
        if ended is None:
            ended = time.monotonic()
        if answer is None:
            attempts, provider, upstream, affinity, repairs = self.attempts, NO_PROVIDER, "", None, []
        else:
            attempts, provider, upstream = answer.attempts, answer.target.provider, answer.target.model
            affinity, restored, repaired = answer.affinity_break, self.restored, answer.repairs
            repairs = [(provider, r) for r in (*restored, *repaired)] if restored or repaired else []
        # by position, in RequestRecord's field order (by keyword the call costs about twice as
        # much, on every request; tests/exchange/test_record.py checks each field by its name)
        return RequestRecord(
            *(self.dialect.ingress, self.request_id, self.session, self.model, provider, self.outcome),
            *(self.status, ended - self.started, self.ttft, upstream),
            [AttemptOutcome(a.provider, a.outcome) for a in attempts],
            *(repairs, self.usage, self.ignored_tokens, affinity, None, self.key, self.key_refusal),
            trace.trace_id if trace is not None else "",
        )


async def run_exchange(
    state: GatewayState, dialect: Dialect, codec: IngressCodec, http: web.Request
) -> web.StreamResponse:
    exchange = Exchange(state, dialect, codec, http)
    if state.tracing is not None:
        exchange.trace = state.tracing.request(dialect.ingress, http.method, http.path, http.headers)
    state.metrics.requests_in_flight.inc(1)
    try:
        return await _run(exchange)
    except ClientError as exc:
        if exchange.outcome == "ok":  # an upstream failure already said what it was
            exchange.outcome = "client_error" if exc.status < 500 else "upstream_error"
        status, body = dialect.error(exc)
        exchange.status = status
        exchange.error = exc.message
        headers = {**exc.headers, REQUEST_ID_HEADER: exchange.request_id}
        return web.Response(status=status, body=body, headers=headers, content_type="application/json")
    except asyncio.CancelledError:
        if state.in_flight.ending:
            # the shutdown's grace period ended it: the stream gets its dialect's error event, an
            # answer not yet started a 503 (gateway/lifecycle.py)
            exchange.outcome = "stream_error" if exchange.status == 200 else "refused"
            exchange.status = exchange.status or 503
        else:
            exchange.outcome = "cancelled"
        raise
    except Exception:
        exchange.outcome = "internal_error"
        exchange.status = 500
        raise
    finally:
        state.metrics.requests_in_flight.inc(-1)
        # the request's end (its duration), accounted for once the answer is on its way, with
        # others (gateway/books.py): a whole answer is written to the client when this returns
        # (in the same step of the loop, unless the client is slow to read), so the record, the
        # metrics, the access-log line, the inspector's capture and the trace are off its latency
        # (nothing changes the exchange after this)
        state.books.add(exchange, time.monotonic(), http.headers)


async def _run(exchange: Exchange) -> web.StreamResponse:
    state, http = exchange.state, exchange.http
    exchange.tenant = http.get(TENANT, "")  # decided by the guard (gateway/security.py)
    if state.limits:
        exchange.key = state.limits.identify(exchange.tenant)
    exchange.raw = raw = await http.read()
    short = parse_short(raw, state.config.server, state.memo.min_bytes)
    if short is not None:  # what the steps below make of a short body, in one call
        (body,), items, offload = short, None, None
    else:
        field = exchange.codec.transcript_field
        # an agent's next turn opens with the body held for its last one: counted from what follows
        held = None if field is None else state.memo.held_bound(_memo_scope(exchange), raw, field)
        values = await values_within_budget(raw, state.config.server, held)
        exchange.offload = offload = Offload() if offloads(values, len(raw)) else None
        body, items = await _parse(exchange, raw, values, held)
        if len(raw) >= books.LARGE_BODY:
            exchange.parsed = body
    decode = exchange.codec.decode
    if offload is not None:
        inbound = await offload.run(
            partial(decode, body, http.headers, state.sealer, items, params=http.match_info, query=http.query)
        )
    else:
        inbound = decode(body, http.headers, state.sealer, items, params=http.match_info, query=http.query)
    exchange.inbound = inbound
    exchange.ignored_tokens = inbound.ignored_tokens
    request = inbound.request
    continued = inbound.history is not None or bool(inbound.references)
    if continued:
        request = await _continue(exchange, inbound, request)
    blocks = check_size(request, state.config.server)
    if continued and blocks >= OFFLOAD_BLOCKS:
        # a short body continuing a long kept conversation: its repair and encode are as long
        offload = _offload(exchange)
    else:
        offload = exchange.offload  # or made for a long record the continuation read
    exchange.plan = plan_for(state, request.model)
    exchange.model = exchange.plan.model
    if exchange.key:
        await _admit(exchange)
    if offload is not None:
        exchange.session = await offload.run(_session, inbound.session_hint, request, exchange.tenant)
    else:
        exchange.session = _session(inbound.session_hint, request, exchange.tenant)
    if exchange.trace is not None:
        # as the access log writes it: a client-chosen X-Session-Id may name a person
        exchange.trace.session, exchange.trace.model = session_hash(exchange.session), exchange.model
    exchange.received = request
    request = exchange.request = exchange.routed = await _restore(exchange, request)

    try:
        answer = await state.engine.open(
            request, exchange.plan, _affinity_key(exchange), exchange.trace, offload
        )
    except AllTargetsFailed as failed:
        exchange.attempts = tuple(failed.attempts)
        exchange.outcome = "upstream_error"
        raise client_error_for(failed, request) from None
    exchange.answer = answer
    if log.isEnabledFor(logging.DEBUG):  # the reasons behind the access log's repair counts
        for repair in answer.repairs:
            log.debug(
                "request %s: %s for %s: %s",
                exchange.request_id,
                repair.kind,
                answer.target.provider,
                repair.detail,
            )
    exchange.reply = Reply(exchange.codec.answer_id(exchange.request_id), request.model, int(time.time()))
    exchange.headers = _headers(exchange, answer)
    if request.stream:
        return await answer_stream(exchange, inbound, request, answer)
    return await answer_whole(exchange, inbound, request, answer)


async def _admit(exchange: Exchange) -> None:
    """A named key's model allow-list and limits: 403 or 429 before anything is routed."""
    limits = exchange.state.limits
    assert limits is not None
    refusal = await limits.admit(exchange.key, exchange.model)
    if refusal is not None:
        exchange.key_refusal = refusal.reason
        raise refusal.error()


async def _parse(
    exchange: Exchange, raw: bytes, values: int | None, held: Shared | None
) -> tuple[Any, Items[Any] | None]:
    """`values`: the body's count by `values_within_budget`, made once by the caller (`held`: from
    what it shares with the memo's held body, compared once for both). A large body
    (`exchange.offload`) is parsed in the worker thread, with the memo as any other: an agent's
    5,000-message turn finds its history there too."""
    state = exchange.state
    server = state.config.server
    field = exchange.codec.transcript_field
    if field is None:
        return await parse_counted(raw, server, values, offload=exchange.offload), None
    scope = _memo_scope(exchange)
    typed = exchange.codec.typed_items
    if exchange.offload is not None:
        return await exchange.offload.run(
            parse_shared, raw, field, state.memo, scope, server, values, True, typed, held
        )
    parsed = parse_shared(raw, field, state.memo, scope, server, values, False, typed, held)
    if parsed is None:  # the worker thread is in the memo: parsed whole, as without it
        return await parse_counted(raw, server, values), None
    return parsed


def _memo_scope(exchange: Exchange) -> str:
    """Where the decode memo keeps what this request's items decoded to: its dialect and tenant
    (one tenant never learns from timing what another sent)."""
    return f"{exchange.dialect.ingress}\0{exchange.tenant}"


# upstream failure category -> the status the client sees; the rest (auth, permission, not found,
# server, connection, protocol) are the gateway's upstream failing it: 502
_STATUS = {
    ErrorCategory.INVALID_REQUEST: 400,
    ErrorCategory.CONTINUITY: 400,
    ErrorCategory.PAIRING: 400,
    ErrorCategory.TOO_LARGE: 413,
    ErrorCategory.RATE_LIMIT: 429,
    ErrorCategory.QUOTA: 429,
    ErrorCategory.OVERLOADED: 503,
    ErrorCategory.TIMEOUT: 504,
}


# a provider refusing the gateway's own key: its message is about that key (OpenAI's quotes part of
# it) and means nothing to the client, whose credentials never reach a provider
_CREDENTIAL_CATEGORIES = frozenset({ErrorCategory.AUTH, ErrorCategory.PERMISSION})


def _credentials_refused(provider: str, error: UpstreamError) -> str:
    status = f" ({error.status})" if error.status else ""
    if error.category is ErrorCategory.AUTH:
        return (
            f"provider {provider!r} rejected the gateway's API key{status}: the gateway operator must"
            " check that provider's key"
        )
    return (
        f"provider {provider!r} refused the gateway's API key access{status}: the gateway operator must"
        " check that key's permissions"
    )


def client_error_for(failed: AllTargetsFailed, request: Request | None = None) -> ClientError:
    """The client's view of a request no target served: a real status (429/503 carry Retry-After),
    the upstream's message (never a provider's words about the gateway's own key), and which
    targets were tried (also in X-Gateway-Attempts)."""
    final = failed.final
    headers = {"X-Gateway-Attempts": str(len(failed.attempts))}
    message = final.message
    if final.code == CONTEXT_OVERFLOW and request is not None and overflow_figures(message) is None:
        # clients read the size from the message: the gateway's estimate where the provider gave none
        message = f"{message} (about {estimate_input_tokens(request)} tokens by the gateway's estimate)"
    if failed.attempts:
        provider = failed.attempts[-1].provider
        headers["X-Gateway-Provider"] = provider
        if final.category in _CREDENTIAL_CATEGORIES and final.type != "missing_api_key":
            message = _credentials_refused(provider, final)
        tried = ", ".join(f"{a.provider}: {a.outcome}" for a in failed.attempts)
        message = f"{message} (attempts: {tried})"
    if final.type == "missing_api_key":
        return ClientError(500, message, type="server_error", code="missing_api_key", headers=headers)
    if final.code == CONTEXT_OVERFLOW:
        # OpenAI's own form (400, code context_length_exceeded), on which Codex and the OpenAI
        # SDKs' users compact; the Messages envelope rewords it for Claude Code
        # (gateway/ingress/errors.py), whichever family overflowed
        return ClientError(
            400,
            message,
            type="invalid_request_error",
            param="messages",
            code=CONTEXT_OVERFLOW,
            headers=headers,
        )
    status = _STATUS.get(final.category, 502)
    if final.retry_after is not None and status in (429, 503):
        headers["Retry-After"] = str(max(1, math.ceil(final.retry_after)))
    kind = "invalid_request_error" if status in (400, 413) else "upstream_error"
    return ClientError(status, message, type=kind, code=final.code or final.category.value, headers=headers)


def plan_for(state: GatewayState, model: str) -> Plan:
    """The targets for `model`, or the client's 404 (400 for a name no provider can have)."""
    try:
        return state.engine.router.plan(model)
    except UnknownModel:
        raise ClientError(
            404,
            f"model {echo_model(model)!r} is not a configured model group or <provider>/<model>"
            f" (model groups: {_names(state.config.models)}; providers: {_names(state.config.providers)})",
            param="model",
            code="model_not_found",
        ) from None
    except InvalidModelName as exc:
        raise invalid(str(exc), param="model", code="invalid_value") from None


_MAX_NAMED = 20  # names listed in a model_not_found message (the rest: /v1/models)
_MAX_ECHOED_MODEL = 200


def echo_model(model: str) -> str:
    return model if len(model) <= _MAX_ECHOED_MODEL else model[:_MAX_ECHOED_MODEL] + "..."


def _names(names: Iterable[str]) -> str:
    listed = list(names)
    more = f", and {len(listed) - _MAX_NAMED} more" if len(listed) > _MAX_NAMED else ""
    return ", ".join(listed[:_MAX_NAMED]) + more if listed else "none"


def _affinity_key(exchange: Exchange) -> str:
    """The session as the engine's affinity knows it: a client-chosen X-Session-Id is scoped by
    tenant, so another tenant naming it cannot move this conversation to another target."""
    return f"{exchange.tenant}\0{exchange.session}" if exchange.tenant else exchange.session


def _offload(exchange: Exchange) -> Offload:
    """The request's worker-thread work, made now if its body did not make it (a long kept
    record to decode): the rest of the request is then worked on there too."""
    if exchange.offload is None:
        exchange.offload = Offload()
    return exchange.offload


def _session(hint: SessionHint | None, request: Request, tenant: str) -> str:
    if hint is None:
        return derive_session_key(request, tenant)
    if not valid_session_id(hint.value):
        message = f"{hint.source} must be 1-128 characters of [A-Za-z0-9._:-]"
        raise ClientError(400, message, param=hint.source)
    return hint.value


async def _continue(exchange: Exchange, inbound: Inbound, request: Request) -> Request:
    """The kept conversation of the answer `inbound.history` names, then the request's own
    messages with the kept items they name by id in place."""
    history = exchange.state.history
    if inbound.history is not None:
        exchange.kept = await history.resolve(inbound.history, exchange.tenant, partial(_offload, exchange))
    messages = request.messages
    if inbound.references:
        found = await history.items(inbound.references, exchange.tenant)
        continued = exchange.kept.answers if exchange.kept is not None else frozenset()
        messages = expand(messages, inbound.references, found, continued)
    if exchange.kept is not None:
        messages = exchange.kept.messages + messages
    return replace(request, messages=messages)


async def _restore(exchange: Exchange, request: Request) -> Request:
    state, session, tenant = exchange.state, exchange.session, exchange.tenant
    request, repairs, exchange.assistants = await restore_recorded(state, request, session, tenant)
    exchange.restored = repairs
    return request


async def restore_recorded(
    state: GatewayState, request: Request, session: str, tenant: str
) -> tuple[Request, tuple[Repair, ...], int]:
    """Recorded turns (with their continuity tokens) back in place of the client's copies, and
    how many assistant turns the request holds (a restored turn replaces the client's copy: the
    position its answer takes). Reads only: the inspector's preview runs it too."""
    keys, distinct = keyed(request, session, tenant)  # a key per assistant turn
    if not distinct:
        return request, (), len(keys)
    wanted = list(distinct)
    records: dict[str, bytes | None] = dict(state.recorder.pending(wanted))
    missing = [k for k in wanted if k not in records] if records else wanted
    if missing:
        records.update(zip(missing, await state.store.get_many(missing), strict=True))
    request, repairs = restore(request, records, session, tenant, keys)
    return request, tuple(repairs), len(keys)


def _headers(exchange: Exchange, answer: Answer) -> dict[str, str]:
    headers = {
        "X-Request-Id": exchange.request_id,
        REQUEST_ID_HEADER: exchange.request_id,
        "X-Session-Id": exchange.session,
        "X-Gateway-Provider": answer.target.provider,
        "X-Gateway-Attempts": str(len(answer.attempts)),
    }
    reasoning = answer.prepared.decision.header()
    if reasoning is not None:  # the client's reasoning choice is not what was sent (README "Reasoning")
        headers["X-Gateway-Reasoning"] = reasoning
    repairs = (*exchange.restored, *answer.repairs)
    if repairs:
        counts = Counter(r.kind for r in repairs)
        headers["X-Gateway-Repairs"] = ",".join(f"{kind}={n}" for kind, n in sorted(counts.items()))
    return headers
