"""`Metrics.record` adds a request's figures to unlocked series of our own (gateway/metric_series.py,
bisected buckets) in a single process: the exposition after any sequence of requests is the one
prometheus-client's own metrics make through their `labels(...).inc()` / `.observe()` (the
reference below is that path, written out as the gateway took it before, on the metrics a worker
of `--workers` uses), series, order, values, HELP/TYPE and all; a negative upstream count fails
the update at the same point."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import (
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)

from gateway.metric_series import CounterSeries, GaugeValue, HistogramSeries
from gateway.metrics import (
    LATENCY_BUCKETS,
    NO_PROVIDER,
    TOKEN_TYPES,
    AttemptOutcome,
    Metrics,
    RequestRecord,
)
from gateway.repair.report import Repair
from gateway.transcript.model import Usage


def prometheus_own() -> Metrics:
    """Metrics on prometheus-client's own Counter / Histogram / Gauge: those of a `--workers`
    worker (the directory is only read by `render`, which the tests here do not call), here with
    the single-process values prometheus-client picks when no directory is set in its module."""
    return Metrics(multiprocess_dir="/nonexistent/never-read")


def reference_record(m: Metrics, rec: RequestRecord) -> None:
    """What `Metrics.record` did through prometheus-client's own API."""
    model, provider = m._model(rec.model), m._provider(rec.provider)
    m.requests.labels(rec.ingress, model, provider, rec.outcome).inc()
    m.duration.labels(rec.ingress, model, provider).observe(rec.duration)
    if rec.ttft is not None:
        m.ttft.labels(model, provider).observe(rec.ttft)
    previous, previous_outcome = "", "ok"
    for attempt in rec.attempts:
        current = m._provider(attempt.provider)
        m.upstream_attempts.labels(current, attempt.outcome).inc()
        if previous and previous_outcome != "ok" and current != previous:
            m.failovers.labels(model, previous, current, previous_outcome).inc()
        previous, previous_outcome = current, attempt.outcome
    kinds: dict[tuple[str, str], int] = {}
    for repair_provider, repair in rec.repairs:
        kinds[(repair_provider, repair.kind)] = kinds.get((repair_provider, repair.kind), 0) + 1
    for (repair_provider, kind), times in kinds.items():
        m.repairs.labels(m._provider(repair_provider), kind).inc(times)
    u = rec.usage
    if u is not None and provider != NO_PROVIDER:
        for kind in TOKEN_TYPES:  # (each names its Usage field)
            value = getattr(u, f"{kind}_tokens")
            if value:
                m.tokens.labels(provider, model, kind).inc(value)
        if rec.cost_usd is None:
            m.cost_unknown.labels(provider, model).inc()
        elif rec.cost_usd:
            m.cost.labels(provider, model).inc(rec.cost_usd)
    if rec.key and (m._keys is None or rec.key in m._keys):
        m.key_requests.labels(rec.key, rec.key_refusal or rec.outcome).inc()
        if u is not None:
            m.key_tokens.labels(rec.key).inc(u.input_tokens + u.output_tokens)
        if rec.cost_usd:
            m.key_cost.labels(rec.key).inc(rec.cost_usd)
    if rec.ignored_tokens:
        m.ignored_tokens.labels(rec.ingress).inc(rec.ignored_tokens)
    if rec.affinity_break is not None:
        m.affinity_breaks.labels(model, rec.affinity_break).inc()


_CREATED = re.compile(rb"^(\w+_created\{?[^ ]*) \S+$", re.MULTILINE)


def exposition(m: Metrics) -> bytes:
    """The scrape, with each `_created` series' time (when the two Metrics made it) blanked."""
    return _CREATED.sub(rb"\1 T", generate_latest(m.registry))


PROVIDERS = ("anthropic", "gemini", "mistral", "stranger")
# durations on and around the bucket bounds, far past the last, and tiny ones
seconds = st.one_of(
    st.sampled_from([*LATENCY_BUCKETS, 0.0, 0.35, 1e-9, 1e6]),
    st.floats(min_value=0, max_value=700, allow_nan=False),
)
counts = st.integers(min_value=0, max_value=10**7)
records = st.builds(
    RequestRecord,
    st.sampled_from(["openai_chat", "anthropic_messages"]),
    model=st.sampled_from(["claude", "fast", "unknown", "not-configured"]),
    provider=st.sampled_from([*PROVIDERS, NO_PROVIDER]),
    outcome=st.sampled_from(["ok", "upstream_error", "stream_error"]),
    duration=seconds,
    ttft=st.none() | seconds,
    attempts=st.lists(
        st.builds(
            AttemptOutcome, st.sampled_from(PROVIDERS), st.sampled_from(["ok", "server", "rate_limit"])
        ),
        max_size=4,
    ),
    repairs=st.lists(
        st.tuples(
            st.sampled_from(PROVIDERS),
            st.builds(Repair, st.sampled_from(["tool_id_projected", "synthetic_tool_result"])),
        ),
        max_size=5,
    ),
    usage=st.none() | st.builds(Usage, counts, counts, counts, counts, counts),
    ignored_tokens=st.integers(min_value=0, max_value=3),
    affinity_break=st.none() | st.sampled_from(["circuit_open", "failover"]),
    cost_usd=st.none() | st.sampled_from([0.0]) | st.floats(min_value=0, max_value=50, allow_nan=False),
    key=st.sampled_from(["", "ci", "dev", "revoked"]),
    key_refusal=st.sampled_from(["", "limited_tokens"]),
)


def bound(metrics: Metrics) -> Metrics:
    metrics.bind(["claude", "fast", "anthropic"], ["anthropic", "gemini", "mistral"])
    metrics.bind_keys(["ci", "dev"])
    return metrics


@settings(max_examples=150, deadline=None)
@given(st.lists(records, max_size=12), st.integers(min_value=0, max_value=3))
def test_scrape_is_the_one_prometheus_own_updates_make(batch, in_flight):
    fast, reference = bound(Metrics()), bound(prometheus_own())
    for rec in batch:
        fast.record(rec)
        reference_record(reference, rec)
    for _ in range(in_flight):
        fast.requests_in_flight.inc(1)
        reference.inflight.inc()
    assert exposition(fast) == exposition(reference)


def test_the_same_scrape_without_created_series():
    fast, reference = bound(Metrics()), bound(prometheus_own())
    rec = RequestRecord("openai_chat", model="claude", provider="anthropic", duration=0.3, ttft=0.1)
    fast.record(rec)
    reference_record(reference, rec)
    disable_created_metrics()
    try:
        scrape = generate_latest(fast.registry)
        assert scrape == generate_latest(reference.registry)
    finally:
        enable_created_metrics()
    assert b"_created" not in scrape and b"_created" in generate_latest(fast.registry)


def test_created_is_when_a_series_first_counted():
    metrics = Metrics()
    metrics.record(RequestRecord("openai_chat", provider=NO_PROVIDER, duration=0.2))
    series = metrics.requests.labels("openai_chat", "unknown", "none", "ok")
    labels = {"ingress": "openai_chat", "model": "unknown", "provider": "none", "outcome": "ok"}
    assert metrics.registry.get_sample_value("gateway_requests_created", labels) == series.created


def test_values_of_a_single_process_are_ours_and_a_workers_prometheus_own():
    metrics = Metrics()
    metrics.record(RequestRecord("openai_chat", provider=NO_PROVIDER, duration=0.2, ttft=0.1))
    series = metrics.requests.labels("openai_chat", "unknown", "none", "ok")
    assert type(series) is CounterSeries and series.value == 1.0
    assert type(metrics.duration.labels("openai_chat", "unknown", "none")) is HistogramSeries
    assert type(metrics.inflight) is GaugeValue and metrics.requests_in_flight is metrics.inflight
    worker = prometheus_own()  # its values are what prometheus-client writes to the shared files
    assert (type(worker.requests), type(worker.duration), type(worker.inflight)) == (
        Counter,
        Histogram,
        Gauge,
    )


def test_a_negative_upstream_count_fails_where_the_counter_did():
    fast, reference = bound(Metrics()), bound(prometheus_own())
    rec = RequestRecord(
        "openai_chat",
        model="claude",
        provider="anthropic",
        usage=Usage(5, -1, 0, 0, 0),
        cost_usd=0.5,
        key="ci",
    )
    for record in (fast.record, lambda r: reference_record(reference, r)):
        with pytest.raises(ValueError, match="non-negative"):
            record(rec)
    assert exposition(fast) == exposition(reference)


def test_the_families_are_registered_under_their_names():
    metrics = Metrics()
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("gateway_requests_total", "again", registry=metrics.registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Histogram("gateway_request_duration_seconds", "again", registry=metrics.registry)
