"""The ContinuityStore contract, run against every backend (memory, sqlite, real redis)."""

from __future__ import annotations

import asyncio

from tests.store.conftest import Backend

ONE_MIB = bytes(range(256)) * 4096


async def test_one_value_under_several_keys_round_trips(backend: Backend) -> None:
    store = backend.make()
    await store.put(["call_a", "call_b", "sess:text-hash"], b"turn-1")
    assert await store.get_many(["call_b", "sess:text-hash", "call_a"]) == [b"turn-1"] * 3


async def test_misses_are_none_in_request_order(backend: Backend) -> None:
    store = backend.make()
    await store.put(["present"], b"v")
    assert await store.get_many(["absent-1", "present", "absent-2", "present"]) == [None, b"v", None, b"v"]
    assert await store.get_many(["never-written"]) == [None]


async def test_empty_key_lists_are_no_ops(backend: Backend) -> None:
    store = backend.make()
    await store.put([], b"ignored")
    assert await store.get_many([]) == []


async def test_entries_expire_after_the_ttl(backend: Backend) -> None:
    store = backend.make(ttl_seconds=1)
    await store.put(["short-lived"], b"v")
    assert await store.get_many(["short-lived"]) == [b"v"]
    await backend.pass_time(1.5)
    assert await store.get_many(["short-lived"]) == [None]


async def test_overwrite_replaces_the_value(backend: Backend) -> None:
    store = backend.make()
    await store.put(["k1", "k2"], b"old")
    await store.put(["k2"], b"new")
    assert await store.get_many(["k1", "k2"]) == [b"old", b"new"]


async def test_values_are_opaque_bytes(backend: Backend) -> None:
    store = backend.make()
    values = {
        "all-bytes": bytes(range(256)),
        "nul-first": b"\x00\x00\xff",
        "not-utf8": b"\xc3\x28\xa0\xa1",
        "empty": b"",  # an empty value is a hit, distinct from a miss
        "key with spaces / unicode \u00e9\u6f22": b"k",
    }
    for key, value in values.items():
        await store.put([key], value)
    assert await store.get_many(list(values)) == list(values.values())


async def test_mutable_buffers_are_copied_on_put(backend: Backend) -> None:
    store = backend.make()
    buffer = bytearray(b"original")
    await store.put(["buf"], buffer)  # type: ignore[arg-type]  # callers may hand over a bytearray
    buffer[:] = b"changed!"
    [value] = await store.get_many(["buf"])
    assert value == b"original" and type(value) is bytes


async def test_large_values(backend: Backend) -> None:
    store = backend.make()
    await store.put(["big-1", "big-2"], ONE_MIB)
    assert await store.get_many(["big-2", "big-1"]) == [ONE_MIB, ONE_MIB]


async def test_many_keys_in_one_call(backend: Backend) -> None:
    store = backend.make()
    keys = [f"call_{n}" for n in range(1200)]  # more than one SQL statement's worth of parameters
    await store.put(keys, b"shared")
    found = await store.get_many([*keys, "missing"])
    assert found == [b"shared"] * len(keys) + [None]


async def test_concurrent_puts_and_gets(backend: Backend) -> None:
    store = backend.make()
    count = 200
    await asyncio.gather(*(store.put([f"c{n}", f"d{n}"], f"value-{n}".encode()) for n in range(count)))
    results = await asyncio.gather(*(store.get_many([f"d{n}", f"c{n}", "nope"]) for n in range(count)))
    assert results == [[f"value-{n}".encode()] * 2 + [None] for n in range(count)]

    # Reads racing writes of the same key see either the old or the new value, never anything else.
    await store.put(["hot"], b"v0")
    ops = []
    for n in range(1, 51):
        ops.append(store.put(["hot"], f"v{n}".encode()))
        ops.append(store.get_many(["hot"]))
    outcomes = await asyncio.gather(*ops)
    allowed = {f"v{n}".encode() for n in range(51)}
    assert all(value in allowed for result in outcomes if isinstance(result, list) for value in result)
    # Puts may travel on different connections (redis), so which one lands last is not fixed.
    [final] = await store.get_many(["hot"])
    assert final in allowed - {b"v0"}


async def test_ping_is_true_when_reachable(backend: Backend) -> None:
    store = backend.make()
    assert await store.ping() is True


async def test_close_after_use(backend: Backend) -> None:
    store = backend.make()
    await store.put(["k"], b"v")
    await store.close()
    await store.close()  # the fixture closes every store again: closing twice is harmless
