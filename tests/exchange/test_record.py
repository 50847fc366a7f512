"""`Exchange.record`: the request's metrics/access-log record says what the exchange learned,
field by field, with and without a committed answer."""

from __future__ import annotations

import time
from types import SimpleNamespace

from gateway.exchange import Exchange
from gateway.ingress.chat import codec as chat
from gateway.metrics import NO_PROVIDER, AttemptOutcome
from gateway.repair.report import Repair
from gateway.routing.answer import Attempt
from gateway.transcript.model import Usage


def learned() -> Exchange:
    exchange = Exchange(None, chat.DIALECT, chat.CODEC, None)  # type: ignore[arg-type]
    exchange.request_id, exchange.session, exchange.model = "r1", "sess_1", "claude"
    exchange.outcome, exchange.status, exchange.ttft = "stream_error", 207, 0.25
    exchange.usage, exchange.ignored_tokens = Usage(1, 2, 3, 4, 5), 6
    exchange.key, exchange.key_refusal = "ci", "limited_tokens"
    exchange.trace = SimpleNamespace(trace_id="t1")  # type: ignore[assignment]
    exchange.restored = (Repair("synthetic_tool_result"),)
    exchange.started = time.monotonic() - 2.0
    return exchange


def test_with_an_answer_every_field_is_the_exchanges():
    exchange = learned()
    attempts = (Attempt("gemini", "overloaded"), Attempt("anthropic", "ok"))
    exchange.answer = SimpleNamespace(  # type: ignore[assignment]
        target=SimpleNamespace(provider="anthropic", model="claude-x"),
        attempts=attempts,
        repairs=(Repair("tool_id_projected"),),
        affinity_break="circuit_open",
    )
    record = exchange.record()
    assert (record.ingress, record.request_id, record.session) == ("chat_completions", "r1", "sess_1")
    assert (record.model, record.provider, record.upstream_model) == ("claude", "anthropic", "claude-x")
    assert (record.outcome, record.status, record.ttft) == ("stream_error", 207, 0.25)
    assert 2.0 <= record.duration < 60
    assert record.attempts == [AttemptOutcome("gemini", "overloaded"), AttemptOutcome("anthropic", "ok")]
    assert record.repairs == [
        ("anthropic", Repair("synthetic_tool_result")),
        ("anthropic", Repair("tool_id_projected")),
    ]
    assert (record.usage, record.ignored_tokens, record.affinity_break) == (
        Usage(1, 2, 3, 4, 5),
        6,
        "circuit_open",
    )
    assert (record.key, record.key_refusal, record.trace_id, record.cost_usd) == (
        "ci",
        "limited_tokens",
        "t1",
        None,
    )


def test_without_an_answer_the_attempts_made_and_no_provider():
    exchange = learned()
    exchange.trace = None
    exchange.attempts = (Attempt("gemini", "rate_limit"),)
    record = exchange.record()
    assert (record.provider, record.upstream_model, record.affinity_break) == (NO_PROVIDER, "", None)
    assert record.attempts == [AttemptOutcome("gemini", "rate_limit")]
    assert record.repairs == [] and record.trace_id == ""
    assert (record.model, record.outcome, record.status, record.key) == ("claude", "stream_error", 207, "ci")


def test_a_record_built_later_has_the_duration_up_to_its_end():
    exchange = learned()
    exchange.trace = None
    ended = exchange.started + 0.125
    time.sleep(0.01)
    assert abs(exchange.record(ended).duration - 0.125) < 1e-9  # not the time of the call
