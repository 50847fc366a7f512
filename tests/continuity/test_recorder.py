"""`Recorder` on its own: only turns with continuity are written, in the background; a write in
flight is readable through `pending` until it lands (a later write of the same key stays), and
`drain` waits for what is still in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from gateway.continuity.codec import decode_turn
from gateway.continuity.keys import turn_keys
from gateway.continuity.recorder import Recorder
from gateway.transcript.model import Continuity, Reasoning, Text, ToolCall

META = Continuity("p", "p", "anthropic", "claude-sonnet-4-5", {"signature": "sig"})
THOUGHTFUL = [Reasoning("thinking...", META), ToolCall("call_1", "f", "{}")]
PLAIN = [Text("just text")]


class GatedStore:
    """A store whose writes land only when the test opens the gate."""

    backend = "memory"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.data: dict[str, bytes] = {}
        self.puts = 0

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        return [self.data.get(k) for k in keys]

    async def put(self, keys: Sequence[str], value: bytes, *, tenant: str = "") -> None:
        self.puts += 1
        await self.gate.wait()
        for key in keys:
            self.data[key] = value

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        pass


async def test_a_turn_without_continuity_is_not_written():
    store = GatedStore()
    recorder = Recorder(store)
    recorder.record(PLAIN, "s", 1)
    await asyncio.sleep(0)
    assert store.puts == 0 and recorder.pending(turn_keys(PLAIN, "s", 1)) == {}


async def test_a_write_in_flight_is_readable_until_it_lands():
    store = GatedStore()
    recorder = Recorder(store)
    keys = turn_keys(THOUGHTFUL, "s", 1, "tenant")
    recorder.record(THOUGHTFUL, "s", 1, "tenant")
    pending = recorder.pending(keys)
    assert set(pending) == set(keys) and keys
    assert decode_turn(pending[keys[0]]) == tuple(THOUGHTFUL)
    store.gate.set()
    await recorder.drain()
    assert recorder.pending(keys) == {}
    assert all(store.data[k] == pending[k] for k in keys)


async def test_a_later_write_of_a_key_stays_pending_when_an_earlier_one_lands():
    store = GatedStore()
    recorder = Recorder(store)
    recorder.put(["k"], b"first")
    recorder.put(["k"], b"second")
    assert recorder.pending(["k"]) == {"k": b"second"}
    store.gate.set()
    await recorder.drain()
    assert recorder.pending(["k"]) == {} and store.puts == 2


async def test_drain_gives_up_after_its_grace_period():
    store = GatedStore()
    recorder = Recorder(store)
    recorder.put(["k"], b"v")
    await recorder.drain(grace_seconds=0.01)  # the gate never opens: drain returns anyway
    assert recorder.pending(["k"]) == {"k": b"v"}
    store.gate.set()
    await recorder.drain()
    assert store.data == {"k": b"v"}


async def test_the_record_of_a_turn_is_done_when_the_store_has_it():
    """The exchange awaits it before the client sees the answer's end: another replica sharing
    the store reads the store, not this process's writes in flight."""
    store = GatedStore()
    recorder = Recorder(store)
    assert recorder.record(PLAIN, "s", 1) is None
    written = recorder.record(THOUGHTFUL, "s", 1, "tenant")
    assert written is not None
    await asyncio.sleep(0)
    assert not written.done() and store.puts == 1
    store.gate.set()
    await written
    keys = turn_keys(THOUGHTFUL, "s", 1, "tenant")
    assert all(decode_turn(store.data[k]) is not None for k in keys)


async def test_a_turn_for_a_store_only_this_process_reads_is_written_without_waiting():
    """The answer does not wait for it: this process's next turn finds it in `pending` until
    the store has it, and no other process reads a memory store."""
    store = GatedStore()
    recorder = Recorder(store)
    assert recorder.local  # a memory store
    keys = turn_keys(THOUGHTFUL, "s", 1, "tenant")
    assert recorder.record(THOUGHTFUL, "s", 1, "tenant", wait=False) is None
    assert set(recorder.pending(keys)) == set(keys)
    await asyncio.sleep(0)
    assert store.puts == 1
    store.gate.set()
    await recorder.drain()
    assert recorder.pending(keys) == {} and all(decode_turn(store.data[k]) is not None for k in keys)


def test_only_a_memory_store_is_read_by_this_process_alone():
    for backend, local in (("memory", True), ("sqlite", False), ("redis", False)):
        store = GatedStore()
        store.backend = backend
        assert Recorder(store).local is local
