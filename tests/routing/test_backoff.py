"""Backoff steps and the retry budget."""

from __future__ import annotations

import random

import pytest

from gateway.routing.backoff import RetryBudget, backoff_delay


@pytest.mark.parametrize("retry", range(8))
def test_backoff_is_half_fixed_half_random_and_capped(retry):
    rng = random.Random(retry)
    step = min(8.0, 0.25 * 2**retry)
    delays = [backoff_delay(retry, 0.25, 8.0, rng) for _ in range(200)]
    assert all(step / 2 <= d <= step for d in delays)
    assert max(delays) - min(delays) > step / 4, "jittered: concurrent retries spread out"


def test_backoff_doubles_until_the_cap_and_never_overflows():
    rng = random.Random(1)
    ranges = [
        (min(ds), max(ds))
        for ds in ([backoff_delay(n, 1.0, 16.0, rng) for _ in range(100)] for n in range(7))
    ]
    for n, (low, high) in enumerate(ranges):
        step = min(16.0, 2.0**n)
        assert step / 2 <= low and high <= step
    assert backoff_delay(10_000, 1.0, 16.0, rng) <= 16.0


def test_the_budget_starts_full_and_is_spent_by_retries():
    budget = RetryBudget(ratio=0.5, burst=2.0)
    assert budget.withdraw() and budget.withdraw()
    assert not budget.withdraw(), "empty"
    assert budget.balance == 0.0


def test_requests_earn_retries_up_to_the_burst():
    budget = RetryBudget(ratio=0.2, burst=3.0)
    while budget.withdraw():
        pass
    for _ in range(4):
        budget.deposit()
    assert not budget.withdraw(), "4 requests x 0.2 is less than one retry"
    budget.deposit()
    assert budget.withdraw()
    for _ in range(100):
        budget.deposit()
    assert budget.balance == 3.0
