"""Circuit breaking per target: what opens it, how long it stays open, the half-open probe."""

from __future__ import annotations

import pytest

from gateway.config import CooldownConfig, config_from_dict
from gateway.routing.cooldown import Breaker, HealthBook, Ticket
from gateway.transcript.events import ErrorCategory, UpstreamError
from gateway.transcript.target import Target

SETTINGS = CooldownConfig(
    consecutive_failures=3,
    failure_rate=0.5,
    window=10,
    min_samples=6,
    cooldown_seconds=5,
    max_cooldown_seconds=40,
)
SERVER = UpstreamError(ErrorCategory.SERVER, "boom", status=500)


def fail(breaker: Breaker, now: float = 0.0, error: UpstreamError = SERVER) -> None:
    ticket = breaker.acquire(now)
    assert ticket is not None
    breaker.failure(ticket, error, now)


def succeed(breaker: Breaker, now: float = 0.0) -> None:
    ticket = breaker.acquire(now)
    assert ticket is not None
    breaker.success(ticket)


def tripped(breaker: Breaker, now: float = 0.0) -> Breaker:
    for _ in range(SETTINGS.consecutive_failures):
        fail(breaker, now)
    return breaker


def test_consecutive_failures_open_the_circuit():
    breaker = Breaker(SETTINGS)
    fail(breaker)
    fail(breaker)
    assert breaker.available(0.0) and not breaker.open
    fail(breaker)
    assert breaker.open and not breaker.available(4.99) and breaker.until == 5.0


def test_a_success_resets_the_run_of_failures():
    breaker = Breaker(SETTINGS)
    for outcome in "FFSFF":  # never three in a row, and fewer samples than min_samples
        fail(breaker) if outcome == "F" else succeed(breaker)
    assert not breaker.open and breaker.consecutive == 2


def test_the_failure_rate_over_the_window_opens_the_circuit():
    breaker = Breaker(SETTINGS)
    sequence = "SSFSFSFSFF"  # at most two in a row; the last failure makes it 5 of 10
    for step, outcome in enumerate(sequence):
        assert not breaker.open, f"open after only {step} outcomes"
        fail(breaker) if outcome == "F" else succeed(breaker)
    assert breaker.open


def test_a_low_failure_rate_keeps_the_circuit_closed():
    breaker = Breaker(SETTINGS)
    for _ in range(50):
        fail(breaker)
        succeed(breaker)
        succeed(breaker)
    assert not breaker.open


def test_only_one_probe_at_a_time_after_the_cooldown():
    breaker = tripped(Breaker(SETTINGS))
    assert breaker.acquire(4.0) is None
    probe = breaker.acquire(5.0)
    assert probe == Ticket(True, 1), "the half-open probe"
    assert not breaker.available(5.0) and breaker.acquire(5.0) is None, "the others wait for its verdict"
    breaker.success(probe)
    assert not breaker.open and breaker.acquire(5.0) == breaker.acquire(5.0) == Ticket(False, 1)


def test_a_failed_probe_doubles_the_cooldown_up_to_the_cap():
    breaker = tripped(Breaker(SETTINGS))
    cooldowns = []
    for _ in range(5):
        now = breaker.until
        fail(breaker, now)
        cooldowns.append(breaker.until - now)
    assert cooldowns == [10.0, 20.0, 40.0, 40.0, 40.0]


def test_a_healthy_window_resets_the_growth():
    breaker = tripped(Breaker(SETTINGS))
    for _ in range(SETTINGS.window + 1):
        succeed(breaker, 5.0)  # the probe, then a whole window of successes
    tripped(breaker, 100.0)
    assert breaker.until == 105.0, "back to the first cooldown step"


def test_a_released_probe_lets_the_next_request_probe():
    breaker = tripped(Breaker(SETTINGS))
    probe = breaker.acquire(5.0)
    breaker.release(probe)  # the client went away mid-probe: no verdict
    assert breaker.acquire(5.0) is not None


def test_stragglers_from_before_the_trip_do_not_decide():
    breaker = Breaker(SETTINGS)
    early = breaker.acquire(0.0)  # sent while the circuit was closed, answers late
    tripped(breaker)
    breaker.success(early)
    assert breaker.open, "a late success is not the probe"
    probe = breaker.acquire(5.0)
    breaker.failure(early, SERVER, 5.0)
    breaker.release(early)
    assert breaker.until == 5.0 and breaker.level == 1 and breaker.probing, "nor is a late failure"
    breaker.success(probe)
    assert not breaker.open


def test_a_straggler_still_reports_an_explicit_retry_after():
    breaker = Breaker(SETTINGS)
    early = breaker.acquire(0.0)
    tripped(breaker)
    breaker.failure(early, UpstreamError(ErrorCategory.RATE_LIMIT, "slow", status=429, retry_after=60.0), 1.0)
    assert breaker.until == 61.0 and breaker.reason is ErrorCategory.RATE_LIMIT


@pytest.mark.parametrize("category", [ErrorCategory.AUTH, ErrorCategory.PERMISSION, ErrorCategory.QUOTA])
def test_auth_and_quota_take_the_target_out_of_service(category):
    breaker = Breaker(SETTINGS)
    fail(breaker, 10.0, UpstreamError(category, "no"))
    assert breaker.open and breaker.until == 10.0 + SETTINGS.out_of_service_seconds
    assert breaker.reason is category


@pytest.mark.parametrize(
    "category",
    [
        ErrorCategory.INVALID_REQUEST,
        ErrorCategory.CONTINUITY,
        ErrorCategory.PAIRING,
        ErrorCategory.TOO_LARGE,
        ErrorCategory.NOT_FOUND,
    ],
)
def test_the_requests_own_faults_leave_health_alone(category):
    breaker = Breaker(SETTINGS)
    for _ in range(10):
        fail(breaker, 0.0, UpstreamError(category, "bad request", status=400))
    assert not breaker.open and breaker.consecutive == 0 and breaker.available(0.0)


def test_retry_after_blocks_the_target_without_opening_the_circuit():
    breaker = Breaker(SETTINGS)
    fail(breaker, 1.0, UpstreamError(ErrorCategory.RATE_LIMIT, "slow down", status=429, retry_after=7.5))
    assert not breaker.open and not breaker.available(8.4) and breaker.available(8.5)
    assert breaker.reason is ErrorCategory.RATE_LIMIT


def test_health_book_keys_targets_by_provider_and_model():
    config = config_from_dict(
        {
            "providers": {
                "p": {
                    "kind": "openai_chat",
                    "base_url": "http://127.0.0.1:1/v1",
                    "api_key_env": "K",
                    "cooldown": {"consecutive_failures": 1, "cooldown_seconds": 2},
                }
            }
        }
    )
    now = [0.0]
    book = HealthBook(config, lambda: now[0])
    a = Target("p", "openai_chat", "model-a", "http://127.0.0.1:1/v1")
    b = Target("p", "openai_chat", "model-b", "http://127.0.0.1:1/v1")
    ticket = book.acquire(a)
    assert ticket is not None
    book.record(a, ticket, UpstreamError(ErrorCategory.OVERLOADED, "busy", status=503))
    assert not book.available(a) and book.available(b)
    assert not book.is_available("p", "model-a") and book.is_available("p", "model-b")
    assert book.available_in(a) == 2.0 and book.available_in(b) == 0.0
    assert not book.rate_limited(a)
    now[0] = 2.0
    assert book.available(a)
    probe = book.acquire(a)
    assert probe is not None and probe.probe
    assert book.available_in(a) == 2.0, "a probe is in flight: blocked for another cooldown step"
    book.record(a, probe, None)
    assert book.available(a) and book.available_in(a) == 0.0


def test_breakers_for_client_chosen_direct_addresses_are_bounded():
    from gateway.config import config_from_dict
    from gateway.routing.cooldown import DIRECT_BREAKERS, HealthBook
    from gateway.transcript.target import Target

    config = config_from_dict(
        {
            "providers": {
                "p": {"kind": "openai_chat", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "K"}
            },
            "models": {"g": {"targets": [{"provider": "p", "model": "configured"}]}},
        }
    )
    book = HealthBook(config)
    configured = Target("p", "openai_chat", "configured", "http://127.0.0.1:1/v1")
    book.breaker(configured).consecutive = 3
    for i in range(DIRECT_BREAKERS * 3):
        book.breaker(Target("p", "openai_chat", f"made-up-{i}", "http://127.0.0.1:1/v1"))
    assert len(book._direct) == DIRECT_BREAKERS
    assert book.breaker(configured).consecutive == 3, "configured targets are never evicted"
