"""A line whose strings are clean is written from its shape's JSON pieces (`access_log._shape`,
kept per distinct set of config names, status, outcomes, attempts, repairs and key) and its
figures as orjson writes them: every line of any sequence of requests is the text orjson makes
of `access_line`'s object with the time first, numbers of every size (exponents, 64-bit counts,
None) included, and a shape seen before never lends a line another's pieces."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway import access_log
from gateway.access_log import access_line, configure_logging, log_access
from gateway.metrics import AttemptOutcome, RequestRecord, new_request_id
from gateway.redaction import Redactor
from gateway.repair.report import REPAIR_KINDS, Repair
from gateway.transcript.model import Usage

TS = "2026-11-27T16:03:27.525+00:00"
NAMES = st.sampled_from(["", "stub", "claude", "gemini-3-pro", "openai_chat", "ok", "server", "a/b", "é"])
FIGURE = st.one_of(
    st.none(),
    st.floats(min_value=0, max_value=1e20, allow_nan=False),
    st.sampled_from([0.0, 1e-7, 1.5e-5, 123456789012345678.0, 0.1]),
)
COUNT = st.integers(min_value=0, max_value=2**63 - 1)
# what an upstream's usage might carry that is not an int (written as orjson writes it)
ODD = COUNT | st.floats(min_value=0, max_value=1e20) | st.booleans()


# The strategies `records` draws from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_ENDPOINTS = st.sampled_from(["chat_completions", "anthropic_messages"])
_REQUEST_IDS = st.builds(new_request_id)
_SESSIONS = st.sampled_from(["", "sess_1", "sess_2"])
_OUTCOMES = st.sampled_from(["ok", "upstream_error"])
_STATUSES = st.sampled_from([0, 200, 400, 502])
_DURATIONS = st.floats(min_value=0, max_value=1e9, allow_nan=False)
_TTFTS = st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False)
_ATTEMPTS = st.lists(st.builds(AttemptOutcome, NAMES, NAMES), max_size=3)
_REPAIRS = st.lists(st.tuples(NAMES, st.builds(Repair, st.sampled_from(sorted(REPAIR_KINDS)))), max_size=3)
_USAGES = st.none() | st.builds(Usage, COUNT, COUNT, COUNT, COUNT, COUNT) | st.builds(Usage, *[ODD] * 5)
_IGNORED = st.integers(0, 10**6)
_TRACE_IDS = st.just("") | _REQUEST_IDS


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    return RequestRecord(
        draw(_ENDPOINTS),
        request_id=draw(_REQUEST_IDS),
        session=draw(_SESSIONS),
        model=draw(NAMES),
        provider=draw(NAMES),
        outcome=draw(_OUTCOMES),
        status=draw(_STATUSES),
        duration=draw(_DURATIONS),
        ttft=draw(_TTFTS),
        upstream_model=draw(NAMES),
        attempts=draw(_ATTEMPTS),
        repairs=draw(_REPAIRS),
        usage=draw(_USAGES),
        ignored_tokens=draw(_IGNORED),
        cost_usd=draw(FIGURE),
        key=draw(NAMES),
        trace_id=draw(_TRACE_IDS),
    )


@pytest.fixture
def out(restore_logging, monkeypatch):
    monkeypatch.setattr(access_log, "_timestamp", lambda milli=None: TS)
    buffer = io.StringIO()
    configure_logging("info", Redactor(("sk-secret-0123456789abcdef",)), buffer)
    return buffer


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(records(), min_size=1, max_size=6))
def test_each_line_is_orjsons_text_of_the_line_object(out, batch):
    out.seek(0)
    out.truncate()
    for record in batch * 2:  # the second time from the shapes kept
        log_access(record)
    expected = [orjson.dumps({"ts": TS, **access_line(record)}).decode() for record in batch * 2]
    assert out.getvalue().splitlines() == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.integers(min_value=0, max_value=3 * 10**9), min_size=1, max_size=8))
def test_the_time_is_isoformat_milliseconds_whenever_asked(monkeypatch, steps):
    """`_timestamp` keeps its text for the millisecond and the second: it is the one `datetime`
    writes for every clock reading, moving on by less or more than either."""
    now = 1_795_000_000 * 10**9 + 999_999_999
    for step in steps:
        now += step
        monkeypatch.setattr(access_log.time, "time_ns", lambda now=now: now)
        seconds, rest = divmod(now, 10**9)
        moment = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=rest // 1000)
        assert access_log._timestamp() == moment.isoformat(timespec="milliseconds")


@settings(max_examples=500, deadline=None)
@given(
    value=st.none()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=-1e17, max_value=1e17)
    | st.sampled_from([0.0, -0.0, 1e-4, 9.9999e-5, 1e16, 9999999999999998.0, 0.1])
)
def test_a_figure_is_written_as_orjson_writes_it(value):
    assert access_log._figure(value) == orjson.dumps(value).decode()


@settings(max_examples=500, deadline=None)
@given(
    value=st.none()
    | st.floats()
    | st.floats(min_value=-1e12, max_value=1e12)
    | st.floats(min_value=0, max_value=10)
    | st.integers(min_value=0, max_value=10**6).map(lambda n: (n + 0.5) / 10_000)  # ms ties at .x5
    | st.sampled_from(
        [0.0, -0.0, 5e-5, 1.5e-4, 2.5e-4, 99999999999.99995, 1e11, -1e11, 1.0000000000000002e11]
    )
)
def test_a_duration_is_written_as_orjson_writes_its_rounded_ms(value):
    """`_duration`'s one format is the text of `round(seconds * 1000, 1)` orjson writes."""
    assert access_log._duration(value) == orjson.dumps(access_log._ms(value)).decode()


@settings(max_examples=200, deadline=None)
@given(
    value=st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.floats(allow_nan=False) | st.booleans()
)
def test_a_count_is_written_as_orjson_writes_it(value):
    assert access_log._count(value) == orjson.dumps(value).decode()
