"""Record answered turns in the background: recording never delays the client's stream, and
shutdown waits (bounded) for the writes still in flight.

Only turns that carry continuity are recorded: restore puts a recorded turn back only for what
the client cannot carry itself (signatures, encrypted reasoning, thought signatures, native tool
ids, reasoning text), so a turn of plain text from a family that issues none (OpenAI Chat,
Anthropic without thinking) would cost store space and a write for nothing."""

from __future__ import annotations

import asyncio

from gateway.continuity.codec import encode_turn
from gateway.continuity.keys import turn_keys
from gateway.store.base import ContinuityStore
from gateway.transcript.model import Block, Reasoning


def carries_continuity(blocks: list[Block]) -> bool:
    """Whether a restore of this turn could give a provider anything the client's copy lacks:
    reasoning (its text is what DeepSeek/Kimi want back) or any block's continuity meta."""
    return any(type(b) is Reasoning or getattr(b, "meta", None) is not None for b in blocks)


class Recorder:
    def __init__(self, store: ContinuityStore) -> None:
        self._store = store
        self._pending: set[asyncio.Task[None]] = set()

    def record(self, blocks: list[Block], session: str, position: int) -> None:
        if not carries_continuity(blocks):
            return
        keys = turn_keys(blocks, session, position)
        if not keys:
            return
        task = asyncio.get_running_loop().create_task(self._store.put(keys, encode_turn(blocks)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def drain(self, grace_seconds: float = 5.0) -> None:
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=grace_seconds)
