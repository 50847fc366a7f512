"""What request handlers share, stored on the aiohttp app under one typed key."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from gateway.access_log import log_access
from gateway.books import Books
from gateway.config import GatewayConfig
from gateway.continuity.chain import History
from gateway.continuity.recorder import Recorder
from gateway.cost import PriceBook
from gateway.http_errors import ingress_label
from gateway.ingress.errors import ClientError
from gateway.ingress.memo import DecodeMemo
from gateway.inspector import Inspector
from gateway.lifecycle import InFlight
from gateway.limits import KeyLimits
from gateway.metrics import NO_PROVIDER, Metrics, RequestRecord, new_request_id
from gateway.redaction import Redactor
from gateway.routing.engine import Engine
from gateway.store.failopen import FailOpenStore
from gateway.tracing import Tracing
from gateway.transcript.seal import Sealer

log = logging.getLogger("gateway")

# the tenant the request guard admitted a request as (gateway/security.py `Tenants`)
TENANT = web.RequestKey("gateway_tenant", str)


def json_response(request: web.BaseRequest, headers: Mapping[str, str], body: bytes) -> web.StreamResponse:
    """A whole 200 JSON answer as aiohttp writes it (`GatewayState.json_answer`'s default)."""
    return web.Response(body=body, headers=headers, content_type="application/json")


def stream_response(
    request: web.BaseRequest, headers: Mapping[str, str], at_once: bool
) -> web.StreamResponse:
    """A 200 stream as aiohttp writes it (`GatewayState.stream_answer`'s default): its head goes
    out at `prepare` when `at_once`, else with the first write."""
    return (web.StreamResponse if at_once else _HeldHead)(status=200, headers=headers)


class _HeldHead(web.StreamResponse):
    """The status line and headers go out with the first write (the dialect's opening, written at
    once after `prepare`) rather than alone at `prepare`: one send and one packet less per
    stream. aiohttp's own `web.Response` buffers its headers the same way (the same class
    attribute); were it renamed, the headers would go out alone again, nothing worse."""

    _send_headers_immediately = False


@dataclass(slots=True)
class GatewayState:
    config: GatewayConfig
    metrics: Metrics
    engine: Engine
    store: FailOpenStore
    recorder: Recorder
    # scrubs provider keys and client tokens from text a client or a log will see
    redactor: Redactor = field(default_factory=Redactor)
    # authenticates the continuity data handed to clients in reasoning_details
    sealer: Sealer = field(default_factory=Sealer)
    # requests being handled; a handler that starts a stream registers it here, so that a
    # shutdown can end it with the dialect's error event (gateway/lifecycle.py)
    in_flight: InFlight = field(default_factory=InFlight)
    # transcript items decoded once per their bytes (gateway/ingress/memo.py)
    memo: DecodeMemo = field(default_factory=lambda: DecodeMemo(0))
    # what the gateway did to each request, for /inspector (gateway/inspector)
    inspector: Inspector = field(default_factory=lambda: Inspector(enabled=False))
    # what answers cost (gateway/cost.py); None: not priced (tests that build a bare state)
    prices: PriceBook | None = None
    # named client keys and their limits (gateway/limits.py); None: no keys configured
    limits: KeyLimits | None = None
    # OpenTelemetry traces (gateway/tracing.py); None: tracing is off
    tracing: Tracing | None = None
    # a whole 200 JSON answer for a request (its body, the gateway's headers): the app's is written
    # as one pre-built block (gateway/whole_answer.py, which knows the app's header restriction)
    json_answer: Callable[[web.BaseRequest, Mapping[str, str], bytes], web.StreamResponse] = json_response
    # a 200 stream's response (its headers; whether they go out at `prepare` rather than with the
    # first write), its head pre-built for the app as the whole answer's (gateway/stream_head.py)
    stream_answer: Callable[[web.BaseRequest, Mapping[str, str], bool], web.StreamResponse] = stream_response
    # answers kept for previous_response_id (gateway/continuity/chain.py)
    history: History = field(init=False)
    # requests that ended and await their bookkeeping (gateway/books.py)
    books: Books = field(init=False)

    def __post_init__(self) -> None:
        store = self.config.store
        self.history = History(
            self.store, self.recorder, ttl_seconds=store.ttl_seconds, max_depth=store.max_chain_depth
        )
        # held unless other workers read what the bookkeeping updates (they cannot settle it)
        self.books = Books(hold=self.metrics.multiprocess_dir is None, in_flight=self.in_flight)
        # whatever reads what the bookkeeping updates sees every request that ended before
        self.metrics.before_read = self.inspector.before_read = self.books.settle

    KEY = web.AppKey("gateway_state", object)  # typed access: request.app[GatewayState.KEY]

    def observe(self, record: RequestRecord, ended_ms: int | None = None) -> None:
        """The one place a finished request is accounted for: metrics, then its access-log line
        (written even if a malformed upstream figure broke the metrics update). The answer's cost
        is worked out here, once, and a named key is charged for it. `ended_ms`: the request's end
        on the wall clock, in ms, when accounted for later (the line's time; default now)."""
        self.price(record)
        self.count(record)
        log_access(record, ended_ms)

    def price(self, record: RequestRecord) -> None:
        """`observe`'s first step: the answer's cost, and a named key charged for it."""
        usage = record.usage
        if usage is not None and record.provider != NO_PROVIDER and self.prices is not None:
            record.cost_usd = self.prices.cost(record.provider, record.upstream_model, usage)
        if record.key and self.limits is not None:
            tokens = usage.input_tokens + usage.output_tokens if usage is not None else 0
            self.limits.spend(record.key, tokens, record.cost_usd)

    def count(self, record: RequestRecord) -> None:
        """`observe`'s second step: the metrics (a failure is logged; the access line still goes)."""
        try:
            self.metrics.record(record)
        except Exception:
            log.exception("metrics update failed for request %s", record.request_id)

    def observe_refusal(self, path: str, exc: ClientError, started: float, request_id: str = "") -> None:
        """A request refused before any dialect handler took it (unknown path, wrong method,
        401, 413, unparsable...) still counts and gets its access-log line, under its path's
        ingress label: outcome `client_error`, or `refused` when the gateway turned it away (503)."""
        self.observe(
            RequestRecord(
                ingress_label(path),
                request_id=request_id or new_request_id(),
                outcome="client_error" if exc.status < 500 else "refused",
                status=exc.status,
                duration=time.monotonic() - started,
            )
        )
