"""MemoryStore specifics: bounded size (LRU eviction) and exact TTL boundaries."""

from __future__ import annotations

import pytest

from gateway.store.memory import MemoryStore
from tests.store.conftest import FakeClock, op_log


async def test_max_entries_bounds_the_store_and_evicts_least_recently_used(clock: FakeClock) -> None:
    store = MemoryStore(ttl_seconds=3600, max_entries=3, clock=clock)
    await store.put(["a"], b"1")
    await store.put(["b"], b"2")
    await store.put(["c"], b"3")
    assert await store.get_many(["a"]) == [b"1"]  # "a" is now the most recently used
    await store.put(["d"], b"4")
    await store.put(["e"], b"5")
    assert len(store) == 3
    assert await store.get_many(["a", "b", "c", "d", "e"]) == [b"1", None, None, b"4", b"5"]


async def test_one_put_with_more_keys_than_the_bound_keeps_only_the_last(clock: FakeClock) -> None:
    store = MemoryStore(ttl_seconds=3600, max_entries=2, clock=clock)
    await store.put(["k1", "k2", "k3"], b"v")
    assert len(store) == 2
    assert await store.get_many(["k1", "k2", "k3"]) == [None, b"v", b"v"]


async def test_expired_entries_leave_room_and_are_dropped(clock: FakeClock) -> None:
    store = MemoryStore(ttl_seconds=10, max_entries=100, clock=clock)
    await store.put([f"old{n}" for n in range(50)], b"old")
    clock.advance(11)
    await store.put(["fresh"], b"new")  # writing expires what is due
    assert len(store) == 1


def test_rejects_unbounded_or_non_expiring_configuration() -> None:
    with pytest.raises(ValueError):
        MemoryStore(ttl_seconds=0, max_entries=10)
    with pytest.raises(ValueError):
        MemoryStore(ttl_seconds=10, max_entries=0)
    with pytest.raises(ValueError):
        MemoryStore(ttl_seconds=10, max_entries=10, max_bytes=0)


async def test_close_releases_the_entries(clock: FakeClock) -> None:
    store = MemoryStore(ttl_seconds=10, max_entries=10, clock=clock)
    await store.put(["k"], b"v")
    await store.close()
    assert len(store) == 0


async def test_max_bytes_bounds_what_the_values_hold(clock: FakeClock) -> None:
    from gateway.store.memory import ENTRY_OVERHEAD_BYTES

    per_entry = 1000 + ENTRY_OVERHEAD_BYTES
    store = MemoryStore(ttl_seconds=3600, max_entries=1000, max_bytes=4 * per_entry, clock=clock)
    for n in range(10):
        await store.put([f"k{n}"], bytes([n]) * 1000)
        assert store.size_bytes <= 4 * per_entry
    assert len(store) == 4
    assert await store.get_many(["k0", "k5", "k9"]) == [None, None, bytes([9]) * 1000]


async def test_a_record_larger_than_the_store_is_refused_and_counted(clock: FakeClock) -> None:
    from gateway.store.failopen import FailOpenStore
    from gateway.store.memory import RecordTooLarge

    store = MemoryStore(ttl_seconds=3600, max_entries=10, max_bytes=4096, clock=clock)
    await store.put(["small"], b"s")
    with pytest.raises(RecordTooLarge):
        await store.put(["huge"], b"h" * 4096)
    seen: list[tuple[str, str, str]] = []
    await FailOpenStore(store, op_log(seen)).put(["huge"], b"h" * 4096)
    assert seen == [("memory", "put", "error")]
    assert await store.get_many(["small", "huge"]) == [b"s", None]


async def test_a_record_costs_its_length_not_the_encoders_buffer(clock: FakeClock) -> None:
    """orjson's output holds several times its length in memory; the store's byte bound counts
    the length, so the store keeps an exact-size copy."""
    import gc
    import tracemalloc

    import orjson

    store = MemoryStore(ttl_seconds=3600, max_entries=10, clock=clock)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value = orjson.dumps("x" * 5000)
        await store.put(["k"], value)
        del value
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert (await store.get_many(["k"]))[0] == orjson.dumps("x" * 5000)
    assert kept < 3 * 5000


async def test_lookups_answered_from_the_entries_dict_match_the_cache_s_own(clock: FakeClock) -> None:
    """A key never written is a miss found in cachetools' entry dict; the rest go through the
    cache (expiry, recency): the same answers and the same eviction order as looking up each."""
    stores = [MemoryStore(ttl_seconds=10, max_entries=4, clock=clock) for _ in range(2)]
    for store in stores:
        await store.put(["a", "b"], b"1")
    clock.advance(6)
    for store in stores:
        await store.put(["c"], b"2")
    (fast,) = stores[0]._tenants.values()
    (slow,) = stores[1]._tenants.values()
    assert fast.entries is not None  # cachetools still keeps its entries in a dict
    slow.entries = None
    clock.advance(5)  # "a" and "b" expired, still held
    keys = ["a", "never", "c", "b", "c"]
    assert fast.get_many(keys) == slow.get_many(keys) == [None, None, b"2", None, b"2"]
    for store in stores:
        await store.put(["d", "e", "f"], b"3")
        await store.put(["g"], b"4")
    assert fast.get_many(["c", "d", "g", "x"]) == slow.get_many(["c", "d", "g", "x"])
    assert list(fast) == list(slow)


def test_its_operations_never_suspend_so_the_fail_open_wrapper_arms_no_timer(clock: FakeClock) -> None:
    """What lets FailOpenStore skip its time bound for this store (`waits = False`): a get or a
    put, several tenants' and an eviction's included, completes at its coroutine's first step,
    so no timer could fire while it runs."""
    from gateway.store.failopen import FailOpenStore

    store = MemoryStore(ttl_seconds=3600, max_entries=2, clock=clock)
    assert store.waits is False

    def at_once(coroutine):  # type: ignore[no-untyped-def]
        with pytest.raises(StopIteration) as done:
            coroutine.send(None)
        return done.value.value

    assert at_once(store.put(["a", "b", "c"], b"v")) == 1
    assert at_once(store.put(["t"], b"w", tenant="other")) == 1
    assert at_once(store.get_many(["a", "b", "c", "t"])) == [None, None, b"v", b"w"]
    wrapped = FailOpenStore(store)
    assert at_once(wrapped.put(["d"], b"x")) is None  # no LoopTimeBound: it needs a running loop
    assert at_once(wrapped.get_many(["d", "c"])) == [b"x", None]
