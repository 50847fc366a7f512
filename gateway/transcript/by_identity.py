"""What was computed from a transcript value, found again by that very object.

An agent resends its whole transcript every turn, and the decode memo hands back the same Message
objects for the part already seen (gateway/ingress/memo_chain.py). A step that maps each message
on its own (a repair pass's per-message work, a provider's wire form of one message) can then
skip the messages it mapped on an earlier turn: one dict lookup instead of a walk of its blocks.

Transcript values are frozen, so a result computed from an object stays its result while the
object lives. Each entry holds its object alive, so the `id` it is filed under cannot be reused by
another object while the entry exists; a hit also requires the very object (`is`) and an equal
context (whatever else the result depends on: the target, the capabilities, ...).

Bounded by two generations: entries go into the new one; once its charge reaches the budget it
becomes the old one and the previous old one is dropped; a hit in the old one moves the entry to
the new one. No iteration and no lock: the repair and encode steps of a large request run in a
worker thread (gateway/offload.py) while the loop serves others, and each dict operation is atomic
under the GIL (two threads racing may lose an entry, never return a wrong one).
"""

from __future__ import annotations

from typing import Any


class ByIdentity:
    __slots__ = ("_budget", "_charge", "_new", "_old")

    def __init__(self, budget: int) -> None:
        self._budget = budget  # the most charge one generation holds
        self._charge = 0
        self._new: dict[int, tuple[object, object, Any, int]] = {}
        self._old: dict[int, tuple[object, object, Any, int]] = {}

    def get(self, obj: object, context: object) -> Any:
        """The value filed for `obj` under an equal `context`, or None."""
        key = id(obj)
        entry = self._new.get(key)
        if entry is None:
            entry = self._old.get(key)
            if entry is None or entry[0] is not obj or entry[1] != context:
                return None
            self._file(key, entry)
            return entry[2]
        if entry[0] is not obj or entry[1] != context:
            return None
        return entry[2]

    def put(self, obj: object, context: object, value: Any, charge: int = 1) -> None:
        """File `value` (never None) for `obj` under `context`; `charge`: its share of the budget
        (1 for an entry count, its length for bytes)."""
        self._file(id(obj), (obj, context, value, charge))

    def clear(self) -> None:
        self._new, self._old, self._charge = {}, {}, 0

    def _file(self, key: int, entry: tuple[object, object, Any, int]) -> None:
        if self._charge >= self._budget:
            self._old, self._new, self._charge = self._new, {}, 0
        self._new[key] = entry
        self._charge += entry[3]
