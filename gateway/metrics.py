"""Prometheus metrics. Names and label keys are a contract (DESIGN.md section 2; dashboards/ and
the README use them). Every request is recorded once, at its end, from one RequestRecord; label
values come from config names only (`bind`), so cardinality stays bounded whatever clients send."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from msgspec import Struct
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector

from gateway.metric_series import CounterFamily, GaugeValue, HistogramFamily
from gateway.repair.report import Repair
from gateway.transcript.model import Usage

# Whole requests: from a fast cached answer to a long agentic generation (10 minutes).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600)
# Time to first token: 50 ms (a cache hit on a nearby provider) to 60 s (a long thinking phase).
TTFT_BUCKETS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 45, 60)

# label values for "no such config name" (the router uses the same "unknown" for a model it
# cannot resolve)
UNKNOWN_MODEL = "unknown"
NO_PROVIDER = "none"
TOKEN_TYPES = ("input", "output", "cache_read", "cache_write", "reasoning")


_ID_BYTES = 16
_ID_POOL = 256  # ids per read of the OS's random source

_random_pool = bytearray()


def new_request_id() -> str:
    """A random (version 4) UUID as 32 hex digits, as `uuid.uuid4().hex` writes it, without
    building a UUID object: it runs for every request. The bytes are the OS's (as uuid4's), read
    for 256 ids at a time: a system call per request cost more than the rest of this."""
    global _random_pool
    if not _random_pool:
        _random_pool = bytearray(os.urandom(_ID_BYTES * _ID_POOL))
    raw = _random_pool[-_ID_BYTES:]
    del _random_pool[-_ID_BYTES:]
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()


def _forget_pool() -> None:
    _random_pool.clear()  # a forked worker must never hand out its parent's ids


os.register_at_fork(after_in_child=_forget_pool)


class AttemptOutcome(Struct):
    provider: str
    outcome: str  # "ok" or an error category


class RequestRecord(Struct):
    """A finished request's figures. Structs, as the attempts': made for every request, their
    fields set in C (0.61 -> 0.26 us a record, 0.36 -> 0.15 an attempt's, warm)."""

    ingress: str
    request_id: str = ""
    session: str = ""  # the session key (the access log hashes it)
    model: str = UNKNOWN_MODEL  # a config name (model group or provider), never raw client input
    provider: str = NO_PROVIDER  # the provider that served, or "none"
    outcome: str = "ok"  # ok | client_error | upstream_error | stream_error | cancelled
    status: int = 0  # the HTTP status answered; 0 when none was (the client went away first)
    duration: float = 0.0
    ttft: float | None = None
    upstream_model: str = ""
    attempts: list[AttemptOutcome] = msgspec.field(default_factory=list)
    repairs: list[tuple[str, Repair]] = msgspec.field(default_factory=list)  # (provider, repair)
    usage: Usage | None = None
    ignored_tokens: int = 0
    affinity_break: str | None = None  # why the session left its target (routing.sessions)
    # USD the answer cost (gateway/cost.py); None: no usage, or a model without a known price
    cost_usd: float | None = None
    key: str = ""  # the named client key (config name) that made the request, if any
    key_refusal: str = ""  # why the key was refused (limited_requests, ..., forbidden_model)
    trace_id: str = ""  # the request's OpenTelemetry trace, when tracing is on


@dataclass(slots=True)
class _Bound:
    """The series of one (ingress, model, provider, outcome): what every request updates, looked
    up once per label set (`Metrics._bound`); the others once first updated (a series appears in
    /metrics when it first counts something, as through `labels`)."""

    requests: Any
    duration: Any
    ttft: Any = None
    tokens: list[Any] = field(default_factory=lambda: [None] * len(TOKEN_TYPES))  # by TOKEN_TYPES
    cost: Any = None
    cost_unknown: Any = None


def _counter(
    plain: bool, name: str, documentation: str, labelnames: list[str], *, registry: CollectorRegistry
) -> Any:
    if plain:
        return CounterFamily(name, documentation, labelnames, registry)
    return Counter(name, documentation, labelnames, registry=registry)


def _histogram(
    plain: bool,
    name: str,
    documentation: str,
    labelnames: list[str],
    *,
    buckets: tuple[float, ...],
    registry: CollectorRegistry,
) -> Any:
    if plain:
        return HistogramFamily(name, documentation, labelnames, buckets, registry)
    return Histogram(name, documentation, labelnames, buckets=buckets, registry=registry)


# How often a worker writes its targets' availability for the others to read (see watch_targets).
TARGETS_REFRESH_SECONDS = 1.0


def enable_multiprocess(directory: str) -> None:
    """Make this process's metrics part of a multi-process aggregate (`gateway serve --workers`).
    Each worker writes its values to files in `directory` and a scrape of any worker reads them
    all. Call in the worker before any Metrics is built: prometheus-client reads the directory
    from this variable, and picks its value class from it when first imported (redone here, so
    the order of imports does not matter)."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    values.ValueClass = values.get_value_class()


class _BeforeRead:
    """First in the registry: whatever collects it (a scrape, a test's read) has the requests
    that ended accounted for first (`Metrics.before_read`, gateway/books.py)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable[Any]:
        self._metrics.before_read()
        return ()


def _nothing() -> None:
    pass


class Metrics:
    def __init__(
        self, registry: CollectorRegistry | None = None, multiprocess_dir: str | None = None
    ) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.before_read: Callable[[], None] = _nothing
        r.register(_BeforeRead(self))
        # set: this process is one of several workers, and a scrape reports all of them
        self.multiprocess_dir = multiprocess_dir
        self._target_probes: list[tuple[Any, Callable[[], float]]] = []
        # label values accepted for model / provider; None until `bind` (then anything else
        # collapses to UNKNOWN_MODEL / NO_PROVIDER)
        self._models: frozenset[str] | None = None
        self._providers: frozenset[str] | None = None
        # What each request updates: unlocked series of our own in a single process
        # (gateway/metric_series.py); prometheus-client's metrics with several workers, whose
        # values live in the files a scrape of any worker reads. Both take `labels(...)`, their
        # series `inc` / `observe`, and both render the same exposition.
        plain = multiprocess_dir is None
        self.requests = _counter(
            plain,
            "gateway_requests_total",
            "Client requests by outcome",
            ["ingress", "model", "provider", "outcome"],
            registry=r,
        )
        self.duration = _histogram(
            plain,
            "gateway_request_duration_seconds",
            "Client request duration",
            ["ingress", "model", "provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = _histogram(
            plain,
            "gateway_time_to_first_token_seconds",
            "Time to the first content delta",
            ["model", "provider"],
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.upstream_attempts = _counter(
            plain,
            "gateway_upstream_attempts_total",
            "Upstream attempts by outcome",
            ["provider", "outcome"],
            registry=r,
        )
        self.failovers = _counter(
            plain,
            "gateway_failovers_total",
            "Moves from one target to the next",
            ["model", "from_provider", "to_provider", "reason"],
            registry=r,
        )
        self.repairs = _counter(
            plain, "gateway_repairs_total", "Transcript repairs applied", ["provider", "kind"], registry=r
        )
        self.tokens = _counter(
            plain, "gateway_tokens_total", "Tokens by type", ["provider", "model", "type"], registry=r
        )
        self.store_operations = Counter(
            "gateway_store_operations_total",
            "Continuity store operations",
            ["backend", "op", "outcome"],
            registry=r,
        )
        self._store_children: dict[tuple[str, str, str], Any] = {}
        self._children: dict[tuple[Any, ...], Any] = {}  # see _child
        self._bound_sets: dict[tuple[str, str, str, str], _Bound] = {}  # see _bound
        # `--workers`: counted by the supervisor (gateway/workers.py); 0 in a single process
        self.worker_restarts = Counter(
            "gateway_worker_restarts_total", "Worker processes restarted after they died", registry=r
        )
        # run_exchange adds 1 and -1 on the loop's thread; with several workers: the sum over the
        # live workers
        self.inflight: Any = (
            GaugeValue("gateway_inflight_requests", "Requests in flight", r)
            if plain
            else Gauge(
                "gateway_inflight_requests", "Requests in flight", registry=r, multiprocess_mode="livesum"
            )
        )
        self.requests_in_flight = self.inflight  # (its `inc(1)` / `inc(-1)`)
        # with several workers (each has its own circuit breakers): 1 while any live worker sends
        # the target traffic, as the dashboard's max() across replicas reads it
        self.target_available = Gauge(
            "gateway_target_available",
            "1 when a target can take traffic",
            ["model", "provider"],
            registry=r,
            multiprocess_mode="livemax",
        )
        self.affinity_breaks = _counter(
            plain,
            "gateway_affinity_breaks_total",
            "Sessions moved off the target that served their previous turn, by reason",
            ["model", "reason"],
            registry=r,
        )
        self.ignored_tokens = _counter(
            plain,
            "gateway_ignored_continuity_tokens_total",
            "Echoed continuity tokens that did not parse and were not forwarded",
            ["ingress"],
            registry=r,
        )

        self.cost = _counter(
            plain,
            "gateway_cost_usd_total",
            "USD spent with providers, at their prices for the upstream model",
            ["provider", "model"],
            registry=r,
        )
        self.cost_unknown = _counter(
            plain,
            "gateway_cost_unknown_total",
            "Answers with token usage but no known price for their upstream model",
            ["provider", "model"],
            registry=r,
        )
        self.key_requests = _counter(
            plain,
            "gateway_key_requests_total",
            "Requests per named client key by outcome (limited_requests, limited_tokens,"
            " limited_budget, forbidden_model, or the request's outcome)",
            ["key", "outcome"],
            registry=r,
        )
        self.key_tokens = _counter(
            plain,
            "gateway_key_tokens_total",
            "Input plus output tokens per named client key",
            ["key"],
            registry=r,
        )
        self.key_cost = _counter(
            plain, "gateway_key_cost_usd_total", "USD spent per named client key", ["key"], registry=r
        )
        self._keys: frozenset[str] | None = None

    def bind_keys(self, keys: Iterable[str]) -> None:
        self._keys = frozenset(keys)

    def bind(self, models: Iterable[str], providers: Iterable[str]) -> None:
        """The config names label values may take: model groups (plus provider names, the label of
        a direct "<provider>/<model>" address) and providers. A value outside them, however it got
        into a record, is counted under "unknown" / "none" instead of minting a new series."""
        self._models = frozenset(models) | {UNKNOWN_MODEL}
        self._providers = frozenset(providers) | {NO_PROVIDER}

    def _model(self, value: str) -> str:
        return value if self._models is None or value in self._models else UNKNOWN_MODEL

    def _provider(self, value: str) -> str:
        return value if self._providers is None or value in self._providers else NO_PROVIDER

    def count_store_operation(self, backend: str, op: str, outcome: str, times: int = 1) -> None:
        # called per lookup batch: keep the labelled children instead of resolving each time
        key = (backend, op, outcome)
        child = self._store_children.get(key)
        if child is None:
            child = self._store_children[key] = self.store_operations.labels(backend, op, outcome)
        child.inc(times)

    def watch_targets(self, probes: Iterable[tuple[str, str, Callable[[], float]]]) -> None:
        """`gateway_target_available{model, provider}` for every target, read at scrape time from
        routing's probes (1.0 while the target takes traffic, 0.0 while its circuit is open)."""
        for model, provider, probe in probes:
            child = self.target_available.labels(self._model(model), self._provider(provider))
            if self.multiprocess_dir is None:
                child.set_function(probe)
            else:  # values live in files that other workers read: they are written, not computed
                self._target_probes.append((child, probe))
        self.refresh_targets()

    def refresh_targets(self) -> None:
        """Write every target's availability now (multi-process mode; a no-op otherwise)."""
        for child, probe in self._target_probes:
            child.set(probe())

    async def keep_targets_fresh(self, interval: float = TARGETS_REFRESH_SECONDS) -> None:
        """Multi-process mode: a circuit's state changes with time (a cooldown ends), not only on a
        request, so each worker rewrites its targets' availability every `interval` seconds."""
        while True:
            await asyncio.sleep(interval)
            self.refresh_targets()

    def _child(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, resolved once per label set: label values are config names
        and outcomes (bounded by `bind`), and a lookup through prometheus-client's `labels` costs
        about 1.5 us, several per request."""
        key = (id(metric), *labels)
        series = self._children.get(key)
        if series is None:
            series = self._children[key] = metric.labels(*labels)
        return series

    def _bound(self, ingress: str, model: str, provider: str, outcome: str) -> _Bound:
        """The series a request of this label set updates, resolved together once."""
        key = (ingress, model, provider, outcome)
        bound = self._bound_sets.get(key)
        if bound is None:
            bound = self._bound_sets[key] = _Bound(
                self.requests.labels(ingress, model, provider, outcome),
                self.duration.labels(ingress, model, provider),
            )
        return bound

    def record(self, rec: RequestRecord) -> None:
        """The request's figures, added to its series (a negative upstream count fails the update
        where `Counter.inc` fails): the same series appear when they first count, with the same
        figures, as through each metric's `labels(...).inc()` / `.observe()`."""
        model, provider = self._model(rec.model), self._provider(rec.provider)
        child = self._child
        bound = self._bound(rec.ingress, model, provider, rec.outcome)
        bound.requests.inc(1)
        bound.duration.observe(rec.duration)
        if rec.ttft is not None:
            if bound.ttft is None:
                bound.ttft = self.ttft.labels(model, provider)
            bound.ttft.observe(rec.ttft)
        previous = ""
        previous_outcome = "ok"
        for attempt in rec.attempts:
            current = self._provider(attempt.provider)
            child(self.upstream_attempts, current, attempt.outcome).inc(1)
            # a failover is a move to another provider after a failure; another attempt on the
            # same provider (a retry, rejection recovery) is not one
            if previous and previous_outcome != "ok" and current != previous:
                child(self.failovers, model, previous, current, previous_outcome).inc(1)
            previous, previous_outcome = current, attempt.outcome
        if rec.repairs:  # by kind: a long transcript's turn can count hundreds of one kind
            kinds: dict[tuple[str, str], int] = {}
            for repair_provider, repair in rec.repairs:
                key = (repair_provider, repair.kind)
                kinds[key] = kinds.get(key, 0) + 1
            for (repair_provider, kind), times in kinds.items():
                child(self.repairs, self._provider(repair_provider), kind).inc(times)
        u = rec.usage
        if u is not None and provider != NO_PROVIDER:
            counts = (
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.reasoning_tokens,
            )
            tokens = bound.tokens
            for i, value in enumerate(counts):
                if value:
                    counter = tokens[i]
                    if counter is None:
                        counter = tokens[i] = self.tokens.labels(provider, model, TOKEN_TYPES[i])
                    counter.inc(value)
            if rec.cost_usd is None:
                if bound.cost_unknown is None:
                    bound.cost_unknown = self.cost_unknown.labels(provider, model)
                bound.cost_unknown.inc(1)
            elif rec.cost_usd:
                if bound.cost is None:
                    bound.cost = self.cost.labels(provider, model)
                bound.cost.inc(rec.cost_usd)
        if rec.key and (self._keys is None or rec.key in self._keys):
            child(self.key_requests, rec.key, rec.key_refusal or rec.outcome).inc(1)
            if u is not None:
                child(self.key_tokens, rec.key).inc(u.input_tokens + u.output_tokens)
            if rec.cost_usd:
                child(self.key_cost, rec.key).inc(rec.cost_usd)
        if rec.ignored_tokens:
            child(self.ignored_tokens, rec.ingress).inc(rec.ignored_tokens)
        if rec.affinity_break is not None:
            child(self.affinity_breaks, model, rec.affinity_break).inc(1)

    def render(self) -> bytes:
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        self.before_read()  # this worker's ended requests in its files (gateway/books.py)
        self.refresh_targets()
        every_worker = CollectorRegistry()
        MultiProcessCollector(every_worker, self.multiprocess_dir)
        return generate_latest(every_worker)
