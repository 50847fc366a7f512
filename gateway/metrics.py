"""Prometheus metrics. Names and label keys are a contract (DESIGN.md section 2; dashboards use
them). Every request is recorded once, at its end, from one RequestRecord; label values come from
config names only, so cardinality stays bounded."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from gateway.repair.report import Repair
from gateway.transcript.model import Usage

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600)
TTFT_BUCKETS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 45, 60)


@dataclass(slots=True)
class AttemptOutcome:
    provider: str
    outcome: str  # "ok" or an error category


@dataclass(slots=True)
class RequestRecord:
    ingress: str
    request_id: str = ""
    session: str = ""  # the session key (the access log hashes it)
    model: str = "unknown"  # a config name (model group or provider), never raw client input
    provider: str = "none"  # the provider that served, or "none"
    outcome: str = "ok"  # ok | client_error | upstream_error | stream_error | cancelled
    duration: float = 0.0
    ttft: float | None = None
    upstream_model: str = ""
    attempts: list[AttemptOutcome] = field(default_factory=list)
    repairs: list[tuple[str, Repair]] = field(default_factory=list)  # (provider, repair)
    usage: Usage | None = None
    ignored_tokens: int = 0


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "gateway_requests_total",
            "Client requests by outcome",
            ["ingress", "model", "provider", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "gateway_request_duration_seconds",
            "Client request duration",
            ["ingress", "model", "provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "gateway_time_to_first_token_seconds",
            "Time to the first content delta",
            ["model", "provider"],
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.upstream_attempts = Counter(
            "gateway_upstream_attempts_total",
            "Upstream attempts by outcome",
            ["provider", "outcome"],
            registry=r,
        )
        self.failovers = Counter(
            "gateway_failovers_total",
            "Moves from one target to the next",
            ["model", "from_provider", "to_provider", "reason"],
            registry=r,
        )
        self.repairs = Counter(
            "gateway_repairs_total", "Transcript repairs applied", ["provider", "kind"], registry=r
        )
        self.tokens = Counter(
            "gateway_tokens_total", "Tokens by type", ["provider", "model", "type"], registry=r
        )
        self.store_operations = Counter(
            "gateway_store_operations_total",
            "Continuity store operations",
            ["backend", "op", "outcome"],
            registry=r,
        )
        self.inflight = Gauge("gateway_inflight_requests", "Requests in flight", registry=r)
        self.target_available = Gauge(
            "gateway_target_available", "1 when a target can take traffic", ["model", "provider"], registry=r
        )
        self.ignored_tokens = Counter(
            "gateway_ignored_continuity_tokens_total",
            "Echoed continuity tokens that did not parse and were not forwarded",
            ["ingress"],
            registry=r,
        )

    def set_targets(self, targets: Iterable[tuple[str, str]]) -> None:
        for model, provider in targets:
            self.target_available.labels(model, provider).set(1)

    def record(self, rec: RequestRecord) -> None:
        self.requests.labels(rec.ingress, rec.model, rec.provider, rec.outcome).inc()
        self.duration.labels(rec.ingress, rec.model, rec.provider).observe(rec.duration)
        if rec.ttft is not None:
            self.ttft.labels(rec.model, rec.provider).observe(rec.ttft)
        previous: AttemptOutcome | None = None
        for attempt in rec.attempts:
            self.upstream_attempts.labels(attempt.provider, attempt.outcome).inc()
            if previous is not None and previous.outcome != "ok":
                self.failovers.labels(rec.model, previous.provider, attempt.provider, previous.outcome).inc()
            previous = attempt
        for provider, repair in rec.repairs:
            self.repairs.labels(provider, repair.kind).inc()
        if rec.usage is not None and rec.provider != "none":
            u = rec.usage
            for kind, value in (
                ("input", u.input_tokens),
                ("output", u.output_tokens),
                ("cache_read", u.cache_read_tokens),
                ("cache_write", u.cache_write_tokens),
                ("reasoning", u.reasoning_tokens),
            ):
                if value:
                    self.tokens.labels(rec.provider, rec.model, kind).inc(value)
        if rec.ignored_tokens:
            self.ignored_tokens.labels(rec.ingress).inc(rec.ignored_tokens)

    def render(self) -> bytes:
        return generate_latest(self.registry)
