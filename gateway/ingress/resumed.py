"""A dialect's reading of its transcript list as one left-to-right fold, resumed after the items
the conversation's last turn read (the Responses `input`, Gemini `contents`).

Where an item alone is not a unit to decode (Responses: a reasoning item, a message and a call
make one assistant turn; Gemini: a response pairs with the calls seen before it), the decode memo
(gateway/ingress/memo.py) cannot keep what an item decodes to. It keeps a witness instead: one
small object per item, made when the item is first read and handed back for the same bytes on
every later turn (found by its bytes, or as the held body's: gateway/ingress/memo_chain.py). The
fold's state after a turn's items is held under their witnesses (gateway/transcript/resume.py):
an agent's next turn, whose list opens with the same witnesses, resumes from it and reads only
its new items, at their own places; the result is the reading from the first item, because the
state at that point is (the witnesses' identity says the items before are the same values).

A found item the fold cannot resume past (an edited item before it, or a state no longer held)
stands unparsed in the body (`Known`): the body is then parsed again whole (`Items.whole`) and
every item read from its value, as without the memo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from gateway.ingress.budget import Known
from gateway.ingress.memo import fresh_items
from gateway.ingress.memo_items import Items
from gateway.transcript.resume import Resumable


class Witness(msgspec.Struct, frozen=True, gc=False, eq=False):
    """An item read before: what the memo keeps for it (its identity is all it says: `eq=False`
    compares identity). Out of the collector's sight (`gc=False`: it holds nothing), as are the
    held states' tuples of them once a collection has seen them: a long conversation's thousands
    of witnesses, kept by the memo and the held states, never make a collection longer."""


def _witness() -> Witness:
    return Witness()


class Reading:
    """One request's reading of its list (`body[field]`): from `start` (0, or past the items a held
    state covers: `state`), the items' values in `values` (those before `start` may stand
    unparsed: `value`)."""

    __slots__ = ("_found", "_read", "_kept", "_body", "_field", "start", "state", "values")

    def __init__(
        self, found: Items[Any], kept: bool, body: Any, field: str, values: list[Any], start: int, state: Any
    ) -> None:
        self._found = found
        self._kept = kept
        self._body = body
        self._field = field
        self._read: list[Any] = [*found.found[:start]]
        self.start = start
        self.state = state
        self.values = values

    def value(self, index: int) -> Any:
        """Item `index` parsed (one the fold resumed past may stand unparsed: `Known`, read from
        the body parsed again whole; a state held names an earlier item by its index)."""
        value = self.values[index]
        if type(value) is Known:
            self.values = self._found.whole(self._body)[self._field]
            value = self.values[index]
        return value

    def record(self, index: int) -> None:
        """Item `index` is read now: its witness is found or made, and kept with the memo."""
        self._read.append(self._found.decode(index, _witness))


class ResumedReads:
    """A dialect's held fold states (per conversation, as `Resumable` holds them)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = Resumable()

    def begin(
        self, listed: list[Any], found: Items[Any] | None, body: Any, field: str, context: object
    ) -> Reading:
        """The reading of `listed` (`body[field]`) with what the memo `found` of it (None: outside
        an exchange, every item new), resumed under an equal `context` (what else the fold's
        result depends on) where a state is held."""
        kept = found is not None  # else every item is new, and so is the next request's
        if found is None:
            found = fresh_items(len(listed))
        records = found.found
        if len(records) != len(listed):
            raise ValueError("the memo's items are not the body's list")
        start, state = self._held.find(records, context)
        if records.count(None) != len(records) - start:
            # a found item stands unparsed in `listed`: read from the body parsed again whole
            listed = found.whole(body)[field]
        return Reading(found, kept, body, field, listed, start, state)

    def end(self, reading: Reading, context: object, state: Callable[[], Any]) -> None:
        """Hold `state()`, the fold's state after every item `reading` read (never changed
        afterwards), for the conversation's next turn (not made outside an exchange)."""
        if reading._kept:
            self._held.hold(tuple(reading._read), context, state())

    def clear(self) -> None:
        self._held.clear()
