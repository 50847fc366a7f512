"""MemoryStore specifics: bounded size (LRU eviction) and exact TTL boundaries."""

from __future__ import annotations

import pytest

from gateway.store.memory import MemoryStore
from tests.store.conftest import FakeClock


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


async def test_close_releases_the_entries(clock: FakeClock) -> None:
    store = MemoryStore(ttl_seconds=10, max_entries=10, clock=clock)
    await store.put(["k"], b"v")
    await store.close()
    assert len(store) == 0
