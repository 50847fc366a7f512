"""How long to wait before a retry, and how many retries the gateway can afford.

Failing over to another target costs the overloaded provider nothing, so it is immediate and
free; retrying a target that just failed adds load to it, so it waits (jittered exponential
backoff, never shorter than the provider's Retry-After) and spends from a retry budget that only
grows with real traffic, so an outage cannot multiply the request rate.
"""

from __future__ import annotations

import random


def backoff_delay(retry: int, base: float, cap: float, rng: random.Random) -> float:
    """Seconds to wait before retry number `retry` (0 for the first): "equal jitter" - half of the
    exponential step is fixed and half random, so concurrent retries spread out and none of them
    hammers the provider again at once."""
    step = min(cap, base * 2.0 ** min(retry, 62))
    return step / 2 + rng.uniform(0.0, step / 2)


class RetryBudget:
    """A token bucket filled by requests and drained by retries: each request earns `ratio`
    retries, at most `burst` are saved up. Starts full, so a quiet gateway can still retry."""

    __slots__ = ("_balance", "_burst", "_ratio")

    def __init__(self, ratio: float, burst: float) -> None:
        self._ratio = ratio
        self._burst = burst
        self._balance = burst

    @property
    def balance(self) -> float:
        return self._balance

    def deposit(self) -> None:
        """One request arrived."""
        self._balance = min(self._burst, self._balance + self._ratio)

    def withdraw(self) -> bool:
        """Spend one retry; False (and nothing spent) when the budget is exhausted."""
        if self._balance < 1.0:
            return False
        self._balance -= 1.0
        return True
