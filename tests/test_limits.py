"""Client keys' limits on a clock the test moves: fixed minute and UTC-day windows, Retry-After to
the end of the window, usage added after the request (the crossing request is served), and a
failing store letting requests through."""

from __future__ import annotations

import asyncio

from gateway.config import config_from_dict
from gateway.limits import FORBIDDEN_MODEL, LIMITED_BUDGET, LIMITED_REQUESTS, LIMITED_TOKENS, KeyLimits
from gateway.store.counters import MemoryCounters

DAY = 86400


def limits(clock, counters=None, ops=None, **key):
    config = config_from_dict(
        {
            "providers": {"p": {"kind": "openai_chat", "base_url": "https://x.test/v1", "api_key_env": "K"}},
            "models": {"g": {"targets": [{"provider": "p", "model": "gpt-4.1"}]}},
            "keys": {"k": {"token_env": "T", **key}},
        }
    )
    on_op = (lambda *args: ops.append(args)) if ops is not None else None
    return KeyLimits(
        config, {"tok": "k"}, lambda t: f"tenant-{t}", counters or MemoryCounters(), on_op, clock
    )


async def settled():
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_key_is_found_by_its_tenant_and_only_by_it():
    book = limits(lambda: 0.0)
    assert book.identify("tenant-tok") == "k"
    assert book.identify("tenant-other") == "" and book.identify("") == ""


async def test_requests_per_minute_reset_with_the_calendar_minute():
    now = [20 * DAY + 3600 + 45.2]  # 45.2 s into a minute
    book = limits(lambda: now[0], requests_per_minute=2)
    assert await book.admit("k", "g") is None
    assert await book.admit("k", "g") is None
    refusal = await book.admit("k", "g")
    assert refusal is not None and refusal.status == 429 and refusal.reason == LIMITED_REQUESTS
    assert refusal.retry_after == 15  # ceil(60 - 45.2)
    error = refusal.error()
    assert error.status == 429 and error.headers == {"Retry-After": "15"} and error.code == LIMITED_REQUESTS
    now[0] += 15
    assert await book.admit("k", "g") is None, "a new minute"


async def test_tokens_are_added_after_the_request_so_the_crossing_one_is_served():
    now = [1000.0]
    book = limits(lambda: now[0], tokens_per_minute=100)
    assert await book.admit("k", "g") is None
    book.spend("k", 150, None)  # this request alone went past the limit: it was served
    await settled()
    refusal = await book.admit("k", "g")
    assert refusal is not None and refusal.reason == LIMITED_TOKENS


async def test_the_budget_lasts_a_utc_day_and_retry_after_points_at_midnight():
    now = [5 * DAY + DAY - 100.5]  # 100.5 s before midnight UTC
    book = limits(lambda: now[0], budget_usd_per_day=1.0)
    assert await book.admit("k", "g") is None
    book.spend("k", 10, 0.6)
    await settled()
    assert await book.admit("k", "g") is None, "0.6 of 1.0 spent"
    book.spend("k", 10, 0.6)
    await settled()
    refusal = await book.admit("k", "g")
    assert refusal is not None and refusal.reason == LIMITED_BUDGET and refusal.retry_after == 101
    now[0] += 101
    assert await book.admit("k", "g") is None, "a new day"


async def test_a_model_outside_the_list_is_forbidden_before_anything_is_counted():
    ops = []
    book = limits(lambda: 0.0, ops=ops, models=["g"], requests_per_minute=1)
    refusal = await book.admit("k", "other")
    assert refusal is not None and refusal.status == 403 and refusal.reason == FORBIDDEN_MODEL
    assert refusal.error().type == "permission_error" and refusal.error().code == "model_not_allowed"
    assert ops == []
    assert await book.admit("k", "g") is None
    assert ops == [("memory", "limit", "ok")]


class BrokenCounters(MemoryCounters):
    async def admit(self, key, minute, day):
        raise ConnectionError("store down")

    async def spend(self, key, minute, day, tokens, usd):
        raise ConnectionError("store down")


async def test_a_failing_store_lets_requests_through_and_is_counted():
    ops = []
    book = limits(lambda: 0.0, BrokenCounters(), ops, requests_per_minute=1)
    for _ in range(3):
        assert await book.admit("k", "g") is None
    book.spend("k", 10, 0.1)
    await book.close()
    assert ops == [("memory", "limit", "error")] * 4
