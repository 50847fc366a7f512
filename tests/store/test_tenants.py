"""Each tenant's share of a bounded store: one tenant filling the memory or the Redis store evicts
its own oldest records, never another tenant's continuity."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.store.base import RecordTooLarge
from gateway.store.memory import ENTRY_OVERHEAD_BYTES, MemoryStore
from gateway.store.redis import RedisStore
from tests.redis_server import RedisServer
from tests.store.conftest import FakeClock

RECORD = b"r" * 1000


async def test_memory_a_tenant_over_its_share_evicts_only_its_own_records(clock: FakeClock) -> None:
    share = 10 * (len(RECORD) + ENTRY_OVERHEAD_BYTES)
    store = MemoryStore(3600, 100_000, max_bytes=100 * share, tenant_max_bytes=share, clock=clock)
    await store.put(["b:kept"], RECORD, tenant="b")
    for n in range(500):
        await store.put([f"a:{n}"], RECORD, tenant="a")
    assert store.tenant_bytes("a") <= share
    assert await store.get_many(["b:kept", "a:0", "a:499"]) == [RECORD, None, RECORD]


async def test_memory_when_the_whole_store_is_full_the_largest_tenant_gives_way(clock: FakeClock) -> None:
    per = len(RECORD) + ENTRY_OVERHEAD_BYTES
    store = MemoryStore(3600, 100_000, max_bytes=20 * per, clock=clock)  # one tenant may take it all
    for n in range(5):
        await store.put([f"b:{n}"], RECORD, tenant="b")
    for n in range(100):
        await store.put([f"a:{n}"], RECORD, tenant="a")
    assert store.size_bytes <= 20 * per
    assert await store.get_many([f"b:{n}" for n in range(5)]) == [RECORD] * 5
    assert store.tenant_bytes("a") == 15 * per


async def test_memory_the_entry_bound_also_takes_from_the_tenant_holding_most(clock: FakeClock) -> None:
    store = MemoryStore(3600, 10, clock=clock)
    await store.put(["b:1", "b:2"], b"v", tenant="b")
    await store.put([f"a:{n}" for n in range(50)], b"v", tenant="a")
    assert len(store) == 10
    assert await store.get_many(["b:1", "b:2"]) == [b"v", b"v"]


async def test_redis_a_tenant_over_its_share_evicts_only_its_own_records(redis_server: RedisServer) -> None:
    share = 10 * 1300
    store = RedisStore(redis_server.url, 3600, key_prefix="t1:", tenant_max_bytes=share)
    raw = Redis.from_url(redis_server.url)
    try:
        await store.put(["b:kept"], RECORD, tenant="b")
        for n in range(50):
            await store.put([f"a:{n}"], RECORD, tenant="a")
        await store.put(["a:49"], RECORD, tenant="a")  # written again: counted once
        assert await store.get_many(["b:kept", "a:0", "a:49"]) == [RECORD, None, RECORD]
        kept = [v for v in await store.get_many([f"a:{n}" for n in range(50)]) if v is not None]
        total = int(await raw.hget("gw:tenant:a:sizes", ""))
        assert total <= share and total == len(kept) * (len(RECORD) + 256)
        assert 8 <= len(kept) <= 10
        with pytest.raises(RecordTooLarge):
            await store.put(["a:huge"], b"h" * share, tenant="a")
    finally:
        await raw.aclose()
        await store.close()


async def test_redis_expired_records_leave_their_tenant_share(redis_server: RedisServer) -> None:
    clock = FakeClock(1_700_000_000.0)
    store = RedisStore(redis_server.url, 60, key_prefix="t2:", tenant_max_bytes=1 << 20, clock=clock)
    raw = Redis.from_url(redis_server.url)
    try:
        await store.put(["old1", "old2"], RECORD, tenant="c")
        clock.advance(61)  # the index forgets what has expired by now
        await store.put(["new"], RECORD, tenant="c")
        assert int(await raw.hget("gw:tenant:c:sizes", "")) == len(RECORD) + 256
        assert await raw.zrange("gw:tenant:c:keys", 0, -1) == [b"t2:new"]
    finally:
        await raw.aclose()
        await store.close()
