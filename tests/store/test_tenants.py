"""Each tenant's share of a bounded store: one tenant filling the memory, SQLite or Redis store evicts
its own oldest records, never another tenant's continuity."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.store.base import RecordTooLarge
from gateway.store.memory import ENTRY_OVERHEAD_BYTES, MemoryStore
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from tests.redis_server import RedisServer
from tests.store.conftest import FakeClock, op_log

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
        evicted = 0
        for n in range(50):
            evicted += await store.put([f"a:{n}"], RECORD, tenant="a")
        await store.put(["a:49"], RECORD, tenant="a")  # written again: counted once
        assert await store.get_many(["b:kept", "a:0", "a:49"]) == [RECORD, None, RECORD]
        kept = [v for v in await store.get_many([f"a:{n}" for n in range(50)]) if v is not None]
        total = int(await raw.hget("gw:tenant:a:sizes", ""))
        assert total <= share and total == len(kept) * (len(RECORD) + 256)
        assert 8 <= len(kept) <= 10 and evicted == 50 - len(kept)
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


async def test_sqlite_a_tenant_over_its_share_evicts_only_its_own_records(clock: FakeClock, tmp_path) -> None:
    per = len(RECORD) + ENTRY_OVERHEAD_BYTES
    store = SqliteStore(tmp_path / "c.db", 3600, clock=clock, max_bytes=100 * per, tenant_max_bytes=10 * per)
    try:
        await store.put(["b:kept"], RECORD, tenant="b")
        for n in range(50):
            await store.put([f"a:{n}"], RECORD, tenant="a")
        await store.put(["a:49"], RECORD, tenant="a")  # written again: counted once
        assert await store.get_many(["b:kept", "a:0", "a:39", "a:40", "a:49"]) == [
            RECORD,
            None,
            None,
            RECORD,
            RECORD,
        ]
        assert store.evicted == 40
        assert _tenant_bytes(tmp_path / "c.db") == {"a": 10 * per, "b": per}
        with pytest.raises(RecordTooLarge):
            await store.put(["a:huge"], b"h" * 10 * per, tenant="a")
    finally:
        await store.close()


async def test_sqlite_when_the_whole_store_is_full_the_largest_tenant_gives_way(
    clock: FakeClock, tmp_path
) -> None:
    per = len(RECORD) + ENTRY_OVERHEAD_BYTES
    store = SqliteStore(
        tmp_path / "c.db", 3600, clock=clock, max_bytes=20 * per
    )  # one tenant may take it all
    try:
        for n in range(5):
            await store.put([f"b:{n}"], RECORD, tenant="b")
        for n in range(100):
            await store.put([f"a:{n}"], RECORD, tenant="a")
        assert await store.get_many([f"b:{n}" for n in range(5)]) == [RECORD] * 5
        assert _tenant_bytes(tmp_path / "c.db") == {"a": 15 * per, "b": 5 * per}
        assert await store.get_many(["a:84", "a:85", "a:99"]) == [None, RECORD, RECORD]
    finally:
        await store.close()


async def test_sqlite_expired_records_leave_their_tenant_share(clock: FakeClock, tmp_path) -> None:
    per = len(RECORD) + ENTRY_OVERHEAD_BYTES
    store = SqliteStore(tmp_path / "c.db", 60, clock=clock, tenant_max_bytes=3 * per)
    try:
        await store.put(["c:old1", "c:old2", "c:old3"], RECORD, tenant="c")  # its whole share
        clock.advance(61)  # all three are due: they leave room, nothing live is evicted
        await store.put(["c:new1"], RECORD, tenant="c")
        await store.put(["c:new2"], RECORD, tenant="c")
        assert store.evicted == 0
        assert _tenant_bytes(tmp_path / "c.db") == {"c": 2 * per}
        assert await store.get_many(["c:new1", "c:new2"]) == [RECORD, RECORD]
    finally:
        await store.close()


async def test_sqlite_a_file_written_before_the_bounds_is_counted_as_it_opens(
    clock: FakeClock, tmp_path
) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE continuity (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires REAL NOT NULL)")
    old.executemany(
        "INSERT INTO continuity VALUES (?, ?, ?)", [(f"k{n}", RECORD, clock() + 3600) for n in range(5)]
    )
    old.commit()
    old.close()
    per = len(RECORD) + ENTRY_OVERHEAD_BYTES
    store = SqliteStore(path, 3600, clock=clock, tenant_max_bytes=5 * per)
    try:
        await store.put(["new"], RECORD)  # the default tenant's sixth record: its oldest goes
        assert await store.get_many(["k0", "k1", "new"]) == [None, RECORD, RECORD]
        assert _tenant_bytes(path) == {"": 5 * per}
    finally:
        await store.close()


def _tenant_bytes(path) -> dict[str, int]:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return {t: b for t, b in conn.execute("SELECT tenant, bytes FROM tenant_bytes") if b}
    finally:
        conn.close()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_evictions_are_counted_in_the_store_operations(
    backend: str, clock: FakeClock, tmp_path
) -> None:
    from gateway.store.failopen import FailOpenStore

    per = len(RECORD) + ENTRY_OVERHEAD_BYTES
    inner = (
        MemoryStore(3600, 100_000, max_bytes=100 * per, tenant_max_bytes=3 * per, clock=clock)
        if backend == "memory"
        else SqliteStore(tmp_path / "c.db", 3600, clock=clock, tenant_max_bytes=3 * per)
    )
    seen: list[tuple[str, str, str]] = []
    store = FailOpenStore(inner, op_log(seen))
    try:
        for n in range(5):
            await store.put([f"a:{n}"], RECORD, tenant="a")
        await store.put(["a:5", "a:6"], RECORD, tenant="a")
    finally:
        await store.close()
    assert seen.count((backend, "evict", "ok")) == 4  # 7 records, a share of 3
    assert seen.count((backend, "put", "ok")) == 6
