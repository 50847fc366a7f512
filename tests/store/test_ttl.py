"""Exact TTL behaviour on the backends whose clock tests control (redis keeps its own time; its TTL is
checked in test_redis.py through PTTL)."""

from __future__ import annotations

from tests.store.conftest import Backend


async def test_visible_until_the_ttl_and_not_after(clocked_backend: Backend) -> None:
    store = clocked_backend.make(ttl_seconds=60)
    await store.put(["k"], b"v")
    await clocked_backend.pass_time(59.9)
    assert await store.get_many(["k"]) == [b"v"]
    await clocked_backend.pass_time(0.2)
    assert await store.get_many(["k"]) == [None]


async def test_overwrite_restarts_the_ttl(clocked_backend: Backend) -> None:
    store = clocked_backend.make(ttl_seconds=60)
    await store.put(["k", "other"], b"v1")
    await clocked_backend.pass_time(40)
    await store.put(["k"], b"v2")
    await clocked_backend.pass_time(40)  # 80 s after the first put, 40 s after the second
    assert await store.get_many(["k", "other"]) == [b"v2", None]


async def test_an_expired_key_can_be_written_again(clocked_backend: Backend) -> None:
    store = clocked_backend.make(ttl_seconds=5)
    await store.put(["k"], b"first")
    await clocked_backend.pass_time(10)
    await store.put(["k"], b"second")
    assert await store.get_many(["k"]) == [b"second"]
