"""Record answered turns: the exchange awaits a turn's write before the client gets the answer's
end (another replica or worker may serve the client's next turn), never before its first bytes;
shutdown waits (bounded) for the writes still in flight. A store only this process reads (the
memory store: one process by config) is not waited for (`local`): `pending` has the turn for this
process's reads until the write lands.

A client may send its next turn before the store write of the previous answer has landed (an
agent loop answers a tool call in milliseconds; a redis round trip may take longer). Writes in
flight are therefore readable here until the store has them: `pending` is consulted before the
store, so this process never misses a turn it just answered.

Only turns that carry continuity are recorded: restore puts a recorded turn back only for what
the client cannot carry itself (signatures, encrypted reasoning, thought signatures, native tool
ids, reasoning text), so a turn of plain text from a family that issues none (OpenAI Chat,
Anthropic without thinking) would cost store space and a write for nothing.
"""

from __future__ import annotations

import asyncio

from gateway.continuity.codec import encode_turn
from gateway.continuity.keys import turn_keys
from gateway.store.failopen import FailOpenStore
from gateway.transcript.model import Block, Reasoning


def carries_continuity(blocks: list[Block]) -> bool:
    """Whether a restore of this turn could give a provider anything the client's copy lacks:
    reasoning (its text is what DeepSeek/Kimi want back) or any block's continuity meta."""
    return any(type(b) is Reasoning or getattr(b, "meta", None) is not None for b in blocks)


class Recorder:
    def __init__(self, store: FailOpenStore) -> None:
        self._store = store
        # only this process reads the store: an answer need not wait for its turn's write (on
        # loopback, the write's task and the shield cost a 1,000-message turn's answer ~0.1-0.16
        # ms of its latency: bench/cold_path.py)
        self.local = store.backend == "memory"
        self._pending: set[asyncio.Task[None]] = set()
        self._in_flight: dict[str, bytes] = {}  # key -> record, until its write finished

    def record(
        self, blocks: list[Block], session: str, position: int, tenant: str = "", wait: bool = True
    ) -> asyncio.Future[None] | None:
        """The turn's write (`write`), or None when it carries nothing to record. A caller that
        awaits it knows every process sharing the store can read the turn. `wait` False: written
        in the background (`put`), None."""
        if not carries_continuity(blocks):
            return None
        keys = turn_keys(blocks, session, position, tenant)
        if not keys:
            return None
        if not wait:
            self.put(keys, encode_turn(blocks), tenant)
            return None
        return self.write(keys, encode_turn(blocks), tenant)

    def put(self, keys: list[str], value: bytes, tenant: str = "") -> asyncio.Task[None]:
        """Write `value` under `keys` in the background (readable through `pending` meanwhile)."""
        for key in keys:
            self._in_flight[key] = value
        task = asyncio.get_running_loop().create_task(self._store.put(keys, value, tenant=tenant))
        self._pending.add(task)
        task.add_done_callback(lambda done: self._landed(done, keys, value))
        return task

    def write(self, keys: list[str], value: bytes, tenant: str = "") -> asyncio.Future[None]:
        """Write `value` under `keys`; awaiting the result waits until the store has it (or failed
        open: the store then keeps it for a retry). A caller cancelled meanwhile does not cancel
        the write."""
        return asyncio.shield(self.put(keys, value, tenant))

    def _landed(self, task: asyncio.Task[None], keys: list[str], value: bytes) -> None:
        self._pending.discard(task)
        for key in keys:
            if self._in_flight.get(key) is value:  # a later write of the same key stays
                del self._in_flight[key]

    def pending(self, keys: list[str]) -> dict[str, bytes]:
        """Records of `keys` whose write has not finished yet."""
        in_flight = self._in_flight
        if not in_flight:
            return {}
        return {key: in_flight[key] for key in keys if key in in_flight}

    async def drain(self, grace_seconds: float = 5.0) -> None:
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=grace_seconds)
