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
import socket
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.access_log import session_hash
from gateway.config import ServerConfig
from gateway.continuity import chain
from gateway.continuity.items import expand
from gateway.continuity.restore import answer_position, message_keys, restore
from gateway.ingress.base import Dialect, Inbound, IngressCodec, Reply, SessionHint, StreamEncoder
from gateway.ingress.budget import JsonValues, offloads, raw_parts, value_bound
from gateway.ingress.errors import ClientError, invalid, overflow_figures, parse_json_body
from gateway.ingress.memo import DecodeMemo, Items
from gateway.ingress.ndjson import NdjsonEncoder, accepts_ndjson
from gateway.ingress.split import parse_split
from gateway.ingress.textual import ServerToolsAsText
from gateway.metrics import AttemptOutcome, RequestRecord, new_request_id
from gateway.offload import off_loop
from gateway.repair.report import Repair
from gateway.routing.engine import AllTargetsFailed, Answer, Attempt
from gateway.routing.router import UNKNOWN_MODEL, InvalidModelName, Plan, UnknownModel
from gateway.session import derive_session_key, valid_session_id
from gateway.state import TENANT, GatewayState
from gateway.transcript.assembler import Assembler, AssemblyError
from gateway.transcript.estimate import estimate_input_tokens
from gateway.transcript.events import (
    CONTEXT_OVERFLOW,
    ErrorCategory,
    Event,
    StreamError,
    UpstreamError,
    UsageUpdate,
    is_first_content,
)
from gateway.transcript.model import AssistantTurn, Request, Usage
from gateway.transcript.reasoning import ReasoningFilter, visible_blocks

if TYPE_CHECKING:
    from gateway.tracing import RequestTrace

log = logging.getLogger("gateway")

# on every answer of the API, errors included: the request's id in the inspector (/inspector)
REQUEST_ID_HEADER = "X-Gateway-Request-Id"

# what an upstream that breaks its own answer format raises while its events are folded
_FORMAT_ERRORS = (AssemblyError, TypeError, ValueError, KeyError)


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
    turn: AssistantTurn | None = None  # the answer, once it completed
    key: str = ""  # the named client key (gateway/limits.py)
    key_refusal: str = ""
    trace: RequestTrace | None = None  # the request's span, when tracing is on
    cost_usd: float | None = None  # what the answer cost, once accounted for (GatewayState.observe)
    # what the inspector keeps of it (gateway/inspector): references to what the request made anyway
    raw: bytes = b""  # the body as received
    received: Request | None = None  # the client's transcript, decoded (kept history prepended)
    routed: Request | None = None  # ... with recorded continuity restored: what was routed
    error: str = ""  # the client's error message, or the stream's
    # a large body: its decode, repair and encode run in a worker thread (gateway/offload.py)
    offload: bool = False

    def saw(self, event: Event) -> None:
        """An event on its way to the client: the first content (`is_first_content`) sets the
        time to first token."""
        if self.ttft is None and is_first_content(event):
            self.ttft = time.monotonic() - self.started

    def record(self) -> RequestRecord:
        answer = self.answer
        attempts = answer.attempts if answer is not None else self.attempts
        provider = answer.target.provider if answer is not None else None
        repairs = [*self.restored, *answer.repairs] if answer is not None else list(self.restored)
        record = RequestRecord(
            self.dialect.ingress,
            request_id=self.request_id,
            session=self.session,
            model=self.model,
            outcome=self.outcome,
            status=self.status,
            duration=time.monotonic() - self.started,
            ttft=self.ttft,
            upstream_model=answer.target.model if answer is not None else "",
            attempts=[AttemptOutcome(a.provider, a.outcome) for a in attempts],
            usage=self.usage,
            ignored_tokens=self.ignored_tokens,
            affinity_break=answer.affinity_break if answer is not None else None,
            key=self.key,
            key_refusal=self.key_refusal,
            trace_id=self.trace.trace_id if self.trace is not None else "",
        )
        if provider is not None:
            record.provider = provider
            record.repairs = [(provider, r) for r in repairs]
        return record


async def run_exchange(
    state: GatewayState, dialect: Dialect, codec: IngressCodec, http: web.Request
) -> web.StreamResponse:
    exchange = Exchange(state, dialect, codec, http)
    if state.tracing is not None:
        exchange.trace = state.tracing.request(dialect.ingress, http.method, http.path, http.headers)
    state.metrics.inflight.inc()
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
        state.metrics.inflight.dec()
        record = exchange.record()
        state.observe(record)
        state.inspector.capture(exchange, http.headers)
        exchange.cost_usd = record.cost_usd
        if exchange.trace is not None:
            _finish_trace(exchange.trace, exchange, record)


def _finish_trace(trace: RequestTrace, exchange: Exchange, record: RequestRecord) -> None:
    answer = exchange.answer
    error = answer.error if answer is not None else None
    repairs = (*exchange.restored, *(answer.repairs if answer is not None else ()))
    try:
        trace.finish(record, exchange.turn, error, repairs)
    except Exception:  # telemetry never fails a request that was answered
        log.exception("ending the trace of request %s failed", exchange.request_id)


async def _run(exchange: Exchange) -> web.StreamResponse:
    state, http = exchange.state, exchange.http
    exchange.tenant = http.get(TENANT, "")  # decided by the guard (gateway/security.py)
    if state.limits:
        exchange.key = state.limits.identify(exchange.tenant)
    exchange.raw = raw = await http.read()
    values = await values_within_budget(raw, state.config.server)
    exchange.offload = offload = offloads(values)
    body, items = await _parse(exchange, raw, values)
    decode = exchange.codec.decode
    if offload:
        inbound = await off_loop(
            partial(decode, body, http.headers, state.sealer, None, params=http.match_info, query=http.query)
        )
    else:
        inbound = decode(body, http.headers, state.sealer, items, params=http.match_info, query=http.query)
    exchange.inbound = inbound
    exchange.ignored_tokens = inbound.ignored_tokens
    request = inbound.request
    if inbound.history is not None or inbound.references:
        request = await _continue(exchange, inbound, request)
    check_size(request, state.config.server)
    exchange.plan = plan_for(state, request.model)
    exchange.model = exchange.plan.model
    if exchange.key:
        await _admit(exchange)
    if offload:
        exchange.session = await off_loop(_session, inbound.session_hint, request, exchange.tenant)
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
        return await _stream(exchange, inbound, request, answer)
    return await _whole(exchange, inbound, request, answer)


async def _admit(exchange: Exchange) -> None:
    """A named key's model allow-list and limits: 403 or 429 before anything is routed."""
    limits = exchange.state.limits
    assert limits is not None
    refusal = await limits.admit(exchange.key, exchange.model)
    if refusal is not None:
        exchange.key_refusal = refusal.reason
        raise refusal.error()


async def _parse(exchange: Exchange, raw: bytes, values: int | None) -> tuple[Any, Items[Any] | None]:
    """`values`: the body's count by `values_within_budget`, made once by the caller."""
    state = exchange.state
    server = state.config.server
    if exchange.offload:  # the memo's cache belongs to the event loop: a large body is decoded whole
        return await parse_counted(raw, server, values, offload=True), None
    field = exchange.codec.transcript_field
    if field is None:
        return await parse_counted(raw, server, values), None
    scope = f"{exchange.dialect.ingress}\0{exchange.tenant}"
    return parse_transcript(raw, field, state.memo, scope, server, values)


def parse_transcript(
    raw: bytes, field: str, memo: DecodeMemo, scope: str, limits: ServerConfig, values: int | None = None
) -> tuple[Any, Items[Any] | None]:
    """The body parsed once, and the transcript items (in `field`) the memo found under `scope`
    (gateway/ingress/memo.py): an item the memo knows is found by its bytes and neither parsed
    nor walked by the depth check (gateway/ingress/split.py); a body that cannot be read in parts
    is parsed whole, and its items found by their values; a body whose opening the memo has not
    seen is parsed whole and decoded as without the memo (a long one then waits on probation
    whole for the next request that opens so). `values`: at least the JSON values the
    body holds (`values_within_budget`)."""
    limit = limits.max_json_depth
    seen, opening = memo.admit(scope, raw, field)  # evidence of reuse: else parsed whole
    if seen:
        checks = partial(check_parts, limits=limits, values=values)
        split = parse_split(raw, field, memo, scope, limit, checks, values)
        if split is not None:
            return split
    body = parse_json_body(raw, limit, field)
    check_parts(body, limits, values)
    items = None
    if type(body) is dict:
        listed = body.get(field)
        if type(listed) is list:
            if seen:
                items = memo.items(scope, listed, limit)
            else:
                items = memo.first_sight(listed, limit, raw, field, opening, values)
    return body, items


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


# a body's value count is made in steps, the event loop running between them: bytes per step of
# the bound, strings and structural bytes per step of the exact count (each a few ms)
_BOUND_STEP = 1 << 20
_COUNT_STEP = 20_000


async def parse_within_budget(
    raw: bytes, limits: ServerConfig, skip: str | None = None, offload: bool = False
) -> Any:
    """The parsed body, once it is known to be within the caps that bound its parse and decode:
    its JSON values (`values_within_budget`), then the blocks its lists hold (`check_parts`).
    `offload`: parsed and counted in a worker thread."""
    return await parse_counted(raw, limits, await values_within_budget(raw, limits), skip, offload)


async def parse_counted(
    raw: bytes, limits: ServerConfig, values: int | None, skip: str | None = None, offload: bool = False
) -> Any:
    """`parse_within_budget` for a body whose values `values_within_budget` counted already."""
    if offload:
        body, parts = await off_loop(_parse_and_count, raw, limits.max_json_depth, skip)
        check_parts(body, limits, parts=parts)
    else:
        body = parse_json_body(raw, limits.max_json_depth, skip)
        check_parts(body, limits, values)
    return body


async def values_within_budget(raw: bytes, limits: ServerConfig) -> int | None:
    """Refuse a body of more JSON values than the cap before it is parsed: counted in steps that
    let other requests run, and only when one C-speed count cannot tell. Returns the C-speed
    count (`value_bound` of the whole body), when it was made whole."""
    cap = limits.max_json_values
    bound = 0
    for start in range(0, len(raw), _BOUND_STEP):
        if start:
            await asyncio.sleep(0)
        bound += value_bound(raw, start, start + _BOUND_STEP)
        if bound > cap:
            break
    if bound > cap:
        values = JsonValues(raw)
        while not values.done:
            values.step(_COUNT_STEP)
            if values.count > cap:
                raise ClientError(
                    400,
                    f"the request body holds more than {cap} JSON values ([server] max_json_values)",
                    code="too_many_values",
                )
            await asyncio.sleep(0)
        return None
    return bound


def check_parts(body: Any, limits: ServerConfig, values: int | None = None, parts: int | None = None) -> None:
    """Refuse a body whose lists hold more blocks than the caps allow, before it is decoded
    (`check_size` checks the decoded transcript again: a kept history adds to it). `values`: the
    C-speed bound of the whole body's values (`values_within_budget`), when made; `parts`: the
    body's `raw_parts`, when counted already."""
    most = limits.max_blocks + limits.max_messages + limits.max_tools
    if parts is None:
        # what raw_parts counts (list items, a content list's for its message) is at most the
        # body's brackets and commas: a body whose bound is within the caps needs no count
        parts = raw_parts(body) if values is None or values > most else 0
    if parts > most:
        raise ClientError(
            400,
            f"the request holds {parts} messages, content blocks and tools; this gateway takes at most "
            f"{limits.max_blocks} blocks ([server] max_blocks), {limits.max_messages} messages and "
            f"{limits.max_tools} tools",
            param="messages",
            code="too_many_blocks",
        )


def _parse_and_count(raw: bytes, max_depth: int, skip: str | None) -> tuple[Any, int]:
    body = parse_json_body(raw, max_depth, skip)
    return body, raw_parts(body)


def check_size(request: Request, limits: ServerConfig) -> None:
    """Refuse a transcript beyond the configured caps before any pass runs over it."""
    if len(request.messages) > limits.max_messages:
        raise ClientError(
            400,
            f"the conversation has {len(request.messages)} messages; this gateway takes at most "
            f"{limits.max_messages} ([server] max_messages)",
            param="messages",
            code="too_many_messages",
        )
    if len(request.tools) > limits.max_tools:
        raise ClientError(
            400,
            f"{len(request.tools)} tools; this gateway takes at most {limits.max_tools} ([server] max_tools)",
            param="tools",
            code="too_many_tools",
        )
    blocks = sum(len(m.blocks) for m in request.messages) + len(request.system)
    if blocks > limits.max_blocks:
        raise ClientError(
            400,
            f"the conversation has {blocks} content blocks; this gateway takes at most "
            f"{limits.max_blocks} ([server] max_blocks)",
            param="messages",
            code="too_many_blocks",
        )


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
        exchange.kept = await history.resolve(inbound.history, exchange.tenant)
    messages = request.messages
    if inbound.references:
        found = await history.items(inbound.references, exchange.tenant)
        continued = exchange.kept.answers if exchange.kept is not None else frozenset()
        messages = expand(messages, inbound.references, found, continued)
    if exchange.kept is not None:
        messages = exchange.kept.messages + messages
    return replace(request, messages=messages)


async def _restore(exchange: Exchange, request: Request) -> Request:
    request, repairs = await restore_recorded(exchange.state, request, exchange.session, exchange.tenant)
    exchange.restored = repairs
    return request


async def restore_recorded(
    state: GatewayState, request: Request, session: str, tenant: str
) -> tuple[Request, tuple[Repair, ...]]:
    """Recorded turns (with their continuity tokens) back in place of the client's copies. Reads
    only: the inspector's preview runs it too."""
    keys = message_keys(request, session, tenant)
    wanted = list(dict.fromkeys(k for k in keys if k is not None))
    if not wanted:
        return request, ()
    records: dict[str, bytes | None] = dict(state.recorder.pending(wanted))
    missing = [k for k in wanted if k not in records] if records else wanted
    if missing:
        records.update(zip(missing, await state.store.get_many(missing), strict=True))
    request, repairs = restore(request, records, session, tenant, keys)
    return request, tuple(repairs)


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


async def _record_turn(exchange: Exchange, inbound: Inbound, request: Request, turn: AssistantTurn) -> None:
    """Record the answered turn before the client sees its end (a client may send its next turn
    the moment it has the last byte, on another connection)."""
    state, tenant = exchange.state, exchange.tenant
    # awaited: in this process a write in flight is read from `pending`, but another replica or
    # worker sharing the store reads the store itself
    written = state.recorder.record(turn.blocks, exchange.session, answer_position(request), tenant)
    if written is not None:
        await written
    if inbound.keep:  # awaited: the client may continue it the moment it has the answer's end
        assert exchange.reply is not None
        assert exchange.answer is not None
        seen = turn  # the items are those the client got: without the reasoning it did not see
        if not exchange.answer.prepared.decision.shown:
            seen = replace(turn, blocks=visible_blocks(turn.blocks, False))
        await state.history.keep(
            exchange.reply.id,
            tenant,
            exchange.kept,
            (*request.messages, turn.message()),
            exchange.codec.kept_items(inbound, exchange.reply, seen),
        )


async def _whole(exchange: Exchange, inbound: Inbound, request: Request, answer: Answer) -> web.Response:
    assembler = Assembler()
    hide = None if answer.prepared.decision.shown else ReasoningFilter()
    stream = answer.stream
    try:
        # the batches read directly (two async generators less per event than `answer.events()`)
        try:
            while (batch := await stream.next_batch()) is not None:
                for event in batch:
                    if hide is None or hide.passes(event):  # the first content is what the client sees
                        exchange.saw(event)
                    assembler.add(event)
        finally:
            await stream.aclose()
        turn = assembler.finish()
    except _FORMAT_ERRORS as exc:
        exchange.outcome = "upstream_error"
        raise ClientError(
            502,
            f"{answer.target.provider} broke its own answer format: {exc}",
            type="upstream_error",
            code="protocol",
        ) from None
    exchange.usage = turn.usage
    exchange.turn = turn
    if assembler.error is None:
        await _record_turn(exchange, inbound, request, turn)
    exchange.status = 200
    if not answer.prepared.decision.shown:  # kept whole above; the client asked for no reasoning
        turn = replace(turn, blocks=visible_blocks(turn.blocks, False))
    assert exchange.reply is not None
    body = exchange.codec.answer(inbound, exchange.reply, turn, exchange.state.sealer)
    return web.Response(body=body, headers=exchange.headers, content_type="application/json")


async def _stream(
    exchange: Exchange, inbound: Inbound, request: Request, answer: Answer
) -> web.StreamResponse:
    state, http = exchange.state, exchange.http
    encoder = _stream_encoder(exchange, inbound)
    headers = {**exchange.headers, "Content-Type": encoder.content_type, "Cache-Control": "no-cache"}
    response = web.StreamResponse(status=200, headers=headers)
    assembler = Assembler()  # the turn as it streams, to record once it completed
    keepalive: asyncio.Task[None] | None = None
    try:
        _bound_kernel_buffer(http)
        await response.prepare(http)
        state.in_flight.register_stream(http, response, encoder.error)  # ended this way at shutdown
        exchange.status = 200
        hide = None if answer.prepared.decision.shown else ReasoningFilter()
        relay = _Relay(response, encoder, assembler, exchange, hide)
        if encoder.keepalive_seconds:
            keepalive = asyncio.create_task(relay.keep_alive(encoder.keepalive_seconds))
        try:
            error = await relay.run(answer, encoder.start())
            turn = None if error is not None else assembler.finish()
        except _FORMAT_ERRORS as exc:
            # the upstream broke its own format after the commit point: end the stream well-formed
            log.warning("%s broke its stream format: %s", answer.target.provider, exc)
            error = UpstreamError(ErrorCategory.PROTOCOL, f"{answer.target.provider} broke its stream format")
            turn = None
        if keepalive is not None:
            keepalive.cancel()
        if error is not None:
            # a half-finished turn is never recorded: its reasoning block may be cut short
            exchange.outcome = "stream_error"
            # the provider's message may quote what it was sent: never echo a secret
            exchange.error = state.redactor.text(error.message)
            await response.write(encoder.error(replace(error, message=exchange.error)))
            return response
        assert turn is not None
        exchange.turn = turn
        await _record_turn(exchange, inbound, request, turn)
        await response.write(encoder.finish())
        await response.write_eof()
        return response
    finally:
        if keepalive is not None:
            keepalive.cancel()
        await answer.aclose()


# the kernel's send buffer for a streamed answer (Linux doubles it for its bookkeeping). Left to
# autotuning it grows to net.ipv4.tcp_wmem's maximum (4 MiB): a client that stops reading then
# takes that much of the answer before the relay feels it, kernel memory plus the answer's text
# held meanwhile. A stream's tokens come far slower than this buffer empties on any network.
STREAM_SEND_BUFFER = 64 * 1024


def _bound_kernel_buffer(http: web.Request) -> None:
    sock = http.transport.get_extra_info("socket") if http.transport is not None else None
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, STREAM_SEND_BUFFER)
        except OSError:  # not a TCP socket (a test's pipe): nothing to bound
            pass


def _stream_encoder(exchange: Exchange, inbound: Inbound) -> StreamEncoder:
    """The dialect's own stream, or the provider-agnostic NDJSON events when the client asks for
    them (`Accept: application/x-ndjson`), whatever dialect carried the request."""
    codec, sealer = exchange.codec, exchange.state.sealer
    if accepts_ndjson(exchange.http.headers.get("Accept", "")):
        return ServerToolsAsText(NdjsonEncoder(lambda kind, meta: codec.continuity_token(kind, meta, sealer)))
    assert exchange.reply is not None
    return codec.stream_encoder(inbound, exchange.reply, sealer)


class _Relay:
    """Writes an answer's events as they arrive (one write per upstream chunk). A client that
    reads slower than the answer comes holds the relay: while its connection's buffer is above
    the high-water mark the next chunk is not pulled from the upstream (backpressure), so a
    stalled client costs one chunk plus that buffer until the write timeout ends it
    (gateway/server.py)."""

    __slots__ = ("_response", "_encoder", "_assembler", "_exchange", "_hide", "_last")

    def __init__(
        self,
        response: web.StreamResponse,
        encoder: StreamEncoder,
        assembler: Assembler,
        exchange: Exchange,
        hide: ReasoningFilter | None = None,
    ) -> None:
        self._response = response
        self._encoder = encoder
        self._assembler = assembler
        self._exchange = exchange
        self._hide = hide  # set when the client does not see reasoning (it is still recorded)
        self._last = time.monotonic()  # when the upstream last produced something

    async def run(self, answer: Answer, head: bytes = b"") -> UpstreamError | None:
        """Write `head` (the dialect's opening), relay every event; the stream's error, if it
        ends with one."""
        encoder, assembler, exchange, hide = self._encoder, self._assembler, self._exchange, self._hide
        response, stream = self._response, answer.stream
        # aiohttp drains only every 64 KiB written: the relay waits as soon as the buffer is full
        protocol, writer = exchange.http.protocol, exchange.http.writer
        # the head goes out with the first events when they are in already (read before the
        # commit point: one write, one packet less per stream), never waiting for them
        first = [head] if head else []
        if first and not stream.ready():
            await response.write(head)
            first = []
        # the stream's batches read directly (not through `Answer.batches`, one async generator
        # less per chunk); released as soon as it ended, as `batches` does
        try:
            while (batch := await stream.next_batch()) is not None:
                if not batch:
                    continue
                self._last = time.monotonic()
                out, first = first, []
                for event in batch:
                    t = type(event)
                    if t is StreamError:
                        if out:
                            await response.write(b"".join(out))
                        return event.error
                    if t is UsageUpdate:
                        exchange.usage = event.usage
                    try:
                        assembler.add(event)
                        shown = hide is None or hide.passes(event)
                        chunk = encoder.event(event) if shown else None
                    except _FORMAT_ERRORS:
                        if out:  # what came before the broken event still reaches the client
                            await response.write(b"".join(out))
                        raise
                    if shown:  # the first content is what the client sees
                        exchange.saw(event)
                    if chunk is not None:
                        out.append(chunk)
                if out:
                    await response.write(b"".join(out))
                    if protocol.writing_paused:
                        await writer.drain()
            if first:  # the answer had no events
                await response.write(head)
        finally:
            await stream.aclose()
        return None

    async def keep_alive(self, interval: float) -> None:
        """The dialect's keep-alive after `interval` seconds without upstream bytes (a long
        thinking phase), so clients and proxies do not time the stream out."""
        while True:
            wait = self._last + interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            try:
                await self._response.write(self._encoder.keepalive())
            except (ConnectionError, RuntimeError):  # the client went away: the relay ends too
                return
            self._last = time.monotonic()
