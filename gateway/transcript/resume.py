"""A pass's walk over a conversation, resumed where the previous turn's walk ended.

Some passes are left-to-right folds: what they make of message i, and their state after it,
depend only on the messages up to i (and the target). An agent resends its transcript each turn
with the same message objects in front (the decode memo, identity-keeping passes before), so
such a pass can start from its state after the previous turn's messages and walk only the new
ones: the result is the one a walk from the start gives, because the state at that point is.

The pass stays a pure function of its input: what is held is only ever a result it computed
itself from the same objects (compared by identity: each held entry keeps its messages alive, so
no other object can take their ids) under an equal context. States are never changed once held:
a pass copies what it goes on with.

Keyed by the conversation's first message object; only long transcripts (a short walk costs less
than the bookkeeping). Bounded by the messages the held conversations hold (they keep them alive,
with whatever the decode memo dropped meanwhile), oldest conversation out first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from operator import is_not
from typing import Any, Generic, TypeVar

from gateway.bounded_cache import BoundedCache
from gateway.transcript.model import Message

MIN_MESSAGES = 16
LIMIT = 10_000

V = TypeVar("V")


class ByOpening(Generic[V]):
    """Values held per conversation, keyed by its opening message object (the value keeps that
    message alive, so its `id` names no other object meanwhile), each charged `charge(value)`
    against `limit`, oldest out first. Shared by the resuming passes here and the encoders' held
    wire (gateway/providers/held_wire.py). Thread-safe: large requests are handled in worker
    threads."""

    __slots__ = ("_charge", "_charged", "_held", "_limit", "_lock")

    def __init__(self, limit: int, charge: Callable[[V], int]) -> None:
        self._limit = limit
        self._charge = charge
        self._charged = 0
        self._held: dict[int, V] = {}
        self._lock = threading.Lock()

    def get(self, opening: Message) -> V | None:
        with self._lock:
            return self._held.get(id(opening))

    def put(self, opening: Message, value: V) -> None:
        """Hold `value` in place of what `opening`'s conversation held (nothing if it alone is
        over the limit). Other conversations it pushes out are retired (`retire`), not freed
        here; what this conversation held is freed here: its next turn holds most of the same
        objects, and freeing the rest now lets the next turn's states reuse their memory (retired
        too, a 5,000-message warm turn took 2-3 ms longer: `bench/run.py --only sweep`)."""
        key, charge, cost = id(opening), self._charge, self._charge(value)
        gone: list[V] = []
        with self._lock:
            replaced = self._held.pop(key, None)
            if replaced is not None:
                self._charged -= charge(replaced)
            if cost <= self._limit:
                self._held[key] = value
                self._charged += cost
                while self._charged > self._limit:
                    oldest = self._held.pop(next(iter(self._held)))
                    self._charged -= charge(oldest)
                    gone.append(oldest)
        if gone:
            retire(gone)

    def clear(self) -> None:
        with self._lock:
            self._held, self._charged = {}, 0


# The conversations pushed out of the held ones, kept until `release_retired`: the last reference
# to a long conversation's messages and blocks is often one of these, and freeing a cold
# 1,000-message conversation (a new one pushed the oldest out) costs 0.1-0.3 ms on whichever
# request holds the next one; the exchange releases them after the answer is on its way (gateway/exchange.py's
# bookkeeping). Bounded: past RETIRED_MAX the list is freed where it grows (a caller that never
# releases, e.g. a library user calling the passes directly, keeps at most that many; a new
# conversation retires about ten, one a resuming pass: about three in flight at once are covered).
RETIRED_MAX = 32
_retired: list[object] = []
_retired_lock = threading.Lock()


def retire(values: list[Any]) -> None:
    """Keep `values` alive until `release_retired` (or free them all now, past RETIRED_MAX)."""
    global _retired
    with _retired_lock:
        _retired.extend(values)
        if len(_retired) <= RETIRED_MAX:
            return
        values, _retired = _retired, []
    del values  # freed here, outside the lock


def retired_waiting() -> bool:
    """Whether `release_retired` has anything to free."""
    return bool(_retired)


def release_retired() -> None:
    """Free what the held conversations let go since the last call."""
    global _retired
    if not _retired:
        return
    with _retired_lock:
        gone, _retired = _retired, []
    del gone


def _messages_held(held: tuple[tuple[Message, ...], object, Any]) -> int:
    return len(held[0])


# pairs of tuples (held, given) found to hold the same objects for all of `held`, by their ids:
# one turn's passes mostly hold the same tuple from the last turn and are given the same one now,
# so the identity walk (~12 us a 1,000 messages) is made once a turn, not once a pass. An entry
# keeps both tuples alive (their ids name no other object meanwhile; tuples never change); the
# last few only (a turn's passes in a row, and another thread's)
_SHARED: BoundedCache[tuple[int, int], tuple[tuple[Any, ...], tuple[Any, ...]]] = BoundedCache(8)


def shares_lead(held: tuple[Any, ...] | list[Any], given: tuple[Any, ...] | list[Any]) -> bool:
    """Whether `given` opens with the very objects of `held` (identity), in order."""
    if len(held) > len(given):
        return False
    if held is given:
        return True
    if type(held) is not tuple or type(given) is not tuple:  # a list may change: walked each time
        return not any(map(is_not, held, given))
    key = (id(held), id(given))
    entry = _SHARED.get(key)
    if entry is not None and entry[0] is held and entry[1] is given:
        return True
    if any(map(is_not, held, given)):
        return False
    _SHARED.keep(key, (held, given))  # another thread's entry at worst walked again
    return True


class Resumable:
    __slots__ = ("_held",)

    # held over every conversation: a long agent transcript's messages (ten of 1,000, two of
    # 5,000) stay alive with the states, whatever the decode memo's budget dropped meanwhile, in
    # each of the passes that resume (the bench's RSS under load rose ~90 MiB at 40,000)
    def __init__(self, messages: int = LIMIT) -> None:
        self._held: ByOpening[tuple[tuple[Message, ...], object, Any]] = ByOpening(messages, _messages_held)

    def find(self, messages: tuple[Message, ...], context: object) -> tuple[int, Any]:
        """(n, state): the state held after `messages[:n]` under an equal context, or (0, None)."""
        if len(messages) < MIN_MESSAGES:
            return 0, None
        held = self._held.get(messages[0])
        if held is None:
            return 0, None
        before, held_context, state = held
        if before[0] is not messages[0] or held_context != context or not shares_lead(before, messages):
            return 0, None
        return len(before), state

    def hold(self, messages: tuple[Message, ...], context: object, state: Any) -> None:
        """Keep `state`, the fold's state after all of `messages` (never changed afterwards)."""
        if len(messages) >= MIN_MESSAGES:
            self._held.put(messages[0], (messages, context, state))

    def clear(self) -> None:
        self._held.clear()
