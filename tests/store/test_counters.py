"""The client keys' Redis counters against a real redis-server: what they count, and their bound on
an operation, which counts the event loop's running time (as the continuity store's does): a stall
of this process is not a Redis failure, a silent Redis is cut off at the bound."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from gateway.store.counters import RedisCounters
from tests.redis_server import RedisServer


async def test_requests_tokens_and_usd_are_counted_per_window(redis_server: RedisServer) -> None:
    counters = RedisCounters(redis_server.url)
    try:
        assert await counters.admit("k", 10, 1) == (1, 0, 0.0)
        await counters.spend("k", 10, 1, 40, 0.25)
        assert await counters.admit("k", 10, 1) == (2, 40, 0.25)
        assert await counters.admit("k", 11, 1) == (1, 0, 0.25)  # a new minute, the same day
        assert await counters.admit("other", 11, 1) == (1, 0, 0.0)
    finally:
        await counters.close()


async def test_a_stall_of_the_machine_is_not_a_redis_failure(redis_server: RedisServer) -> None:
    """Redis is not scheduled and this process's loop stands still past the bound; both run again
    together and Redis answers a few ms later. The check is answered, not failed (failed, the key
    would go unlimited: the limits fail open)."""
    counters = RedisCounters(redis_server.url, op_timeout=0.4)
    pid = redis_server.process.pid

    def stall() -> None:
        time.sleep(0.7)
        os.kill(pid, signal.SIGCONT)

    try:
        assert await counters.admit("k", 10, 1) == (1, 0, 0.0)
        os.kill(pid, signal.SIGSTOP)
        asyncio.get_running_loop().call_later(0.05, stall)  # while the check waits for its reply
        assert await counters.admit("k", 10, 1) == (2, 0, 0.0)
    finally:
        os.kill(pid, signal.SIGCONT)
        await counters.close()


async def test_a_silent_redis_is_cut_off_at_the_bound(redis_server: RedisServer) -> None:
    counters = RedisCounters(redis_server.url, op_timeout=0.2)
    pid = redis_server.process.pid
    try:
        await counters.admit("k", 10, 1)
        os.kill(pid, signal.SIGSTOP)
        # the builtin TimeoutError is the bound's; the client's hang guards (5 s) raise redis's own
        with pytest.raises(TimeoutError):
            await counters.admit("k", 10, 1)
        with pytest.raises(TimeoutError):
            await counters.spend("k", 10, 1, 5, 0.0)
    finally:
        os.kill(pid, signal.SIGCONT)
        await counters.close()
