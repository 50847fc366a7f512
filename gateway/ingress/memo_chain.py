"""The decode memo's turns that go on from a held body (gateway/ingress/memo.py): an agent's next
turn re-sends the last one's body and adds to its list, so the held list's bytes are compared
with the new body's at once (one `startswith`: gateway/ingress/slices.py `went_on`), and what the
held items decoded to stands for them; only what follows them is read (the body with the held
items written as one value: no pass over the bytes already seen), parsed and decoded. The new
body, with what its items decode to and where its list is, is then held in the old one's place,
for the turn after. A field before the list that changed length (Codex switching model) moves the
list: it is found by its key, and compared there.

What is held: the body of a long first sight (`first_sight`), of a long turn read item by item
(`hold`) or of a turn that went on (`chain`); one per opening, on probation (a `_FirstSight`
under `first_key`), found by the next request's `admit` that opens the same way. Where its list
is (`list_span`) is known for a turn read in parts and for a first sight read typed (`typed_read`
finds it with the fields it reads anyway), and found on the next turn for a first sight parsed
whole. Anything else (an edited or dropped item, a held item whose decode raised or was never
asked for) reads the request item by item as before (`DecodeMemo.split`), the held list too.
"""

from __future__ import annotations

from itertools import repeat
from operator import is_
from typing import TYPE_CHECKING, Any

from gateway.ingress.budget import Shared, item_parts, knowns, value_bound
from gateway.ingress.memo_items import Items, _FirstSight
from gateway.ingress.memo_size import body_turn_size, narrow, narrow_around
from gateway.ingress.slices import list_span, went_on

if TYPE_CHECKING:
    from gateway.ingress.memo import DecodeMemo

# a list of at least this many items is held whole (what its items decoded to, so that the next
# turn finds them): a transcript this long went on before (a resumed or forked session, or one
# whose opening was forgotten, at first sight); holding a request's decoded items until evicted
# costs a request that never repeats ~10% (bench/memo.py), which shorter ones never pay
LONG_TRANSCRIPT = 64


class Chains:
    """`DecodeMemo`'s held lists (a mixin: the memo's state and lock are the memo's)."""

    def chain(
        self: DecodeMemo, body: bytes, field: str, values: int | None, shared: Shared | None = None
    ) -> tuple[dict[str, Any], list[Any], Items[Any]] | None:
        """A request `body` whose list in `field` goes on from the one `admit` found held under the
        same opening: its top-level fields as `FIELDS` reads them (the list's as `went_on` leaves
        it), the values to put in the list (`Known` for a held item, the new ones parsed) and its
        items; the body is held in the held one's place. None: not such a request. `values`: at
        least the JSON values `body` holds, when counted already. `shared`: what counting them found
        `body` shares with the held body (`slices.shared_with`), when it did."""
        pending = self._pending
        if pending is None:
            return None
        opening, sight = pending
        records = sight.records
        if sight.field != field or any(map(is_, records, repeat(None))):  # an item with no value
            return None
        span = sight.span
        if span is None:  # a first sight parsed whole: where its list is, found once
            span = sight.span = list_span(sight.body, field)
            if span is None:
                return None
        found = went_on(body, sight.body, field, *span, shared)
        if found is None:
            return None
        fields, new, start, end = found
        self._pending = None
        held = sight.knowns
        if held is None:
            held = knowns(sight.parts)
        parts = [item_parts(value) for value in new]
        count = len(records) + len(new)
        items: Items[Any] = Items(
            self, [None] * count, [*records, *([None] * len(new))], [*sight.parts, *parts], body
        )
        items.new_from = len(records)  # every held item has its value
        self.hits += len(records)
        self.misses += len(new)
        # the held items' bytes are the held body's: known narrow with it (no scan of them again)
        known = (start, start + span[1] - span[0]) if sight.narrow else None
        self._hold(opening, body, field, items, values, [*held, *knowns(parts)], (start, end), known)
        return fields, [*held, *new], items

    def hold(
        self: DecodeMemo,
        opening: tuple[str, int] | None,
        body: bytes,
        field: str,
        items: Items[Any],
        values: int | None,
        fields: dict[str, Any],
    ) -> None:
        """A long request read item by item (`split`: its items found or new; `fields`: its body as
        `FIELDS` read it), its body held for the next turn opening as `opening` to go on from
        (`chain`)."""
        if opening is not None and len(items.found) >= LONG_TRANSCRIPT and items._record is None:
            self._hold(opening, body, field, items, values, None, list_span(body, field, fields))

    def _hold(
        self: DecodeMemo,
        opening: tuple[str, int],
        body: bytes,
        field: str,
        items: Items[Any],
        values: int | None,
        knowns: list[Any] | None,
        span: tuple[int, int] | None,
        known: tuple[int, int] | None = None,
    ) -> None:
        """The body `body` holding its list in `field` (`span`: where, when known) held under
        `opening`, with what `items` found or decode (on probation, in place of what was held
        there), and its count `values` (the next turn's body is counted from it:
        `DecodeMemo.held_bound`). `known`: where `body` holds bytes known narrow (`narrow`)."""
        held = _FirstSight(body, field, items._parts, 0)
        held.values = values
        held.span = span
        held.records = [*items.found]
        held.knowns = knowns
        items._record = held.records
        self._place(first_key(opening), held, known)

    def _place(
        self: DecodeMemo, key: tuple[str, bytes, bytes], held: _FirstSight, known: tuple[int, int] | None
    ) -> None:
        """`held` on probation under `key` when its bound fits the budget. A bound that needs a
        pass over the body (its value count, or its scan for \\u escapes: ~0.4 ns a byte, 2.2 ms
        for a 5,000-message body) is made later, off the answer's path (`settle`); what its items
        decode to is recorded meanwhile all the same (`held.records`)."""
        if held.values is not None:
            size = body_turn_size(held.body, held.values, len(held.parts), 0, narrow_text=False)
            if size <= self._items_max:
                held.size = size
                self._on_probation(key, held)
                return
        self._settle()  # one waits at a time: an earlier one is placed first, in its order
        self._unsized = (key, held, known)

    def unsettled(self: DecodeMemo) -> bool:
        """Whether a body held last waits for `settle`."""
        return self._unsized is not None

    def settle(self: DecodeMemo) -> None:
        """The body held last, placed on probation once bounded, if it waits (`_place`): called
        once a request's answer is on its way (the exchange's bookkeeping). Never waits for the
        lock: the next request that takes it (`admit`, `held_bound`) settles it then."""
        if self._unsized is None or not self.lock.acquire(blocking=False):
            return
        try:
            self._settle()
        finally:
            self.lock.release()

    def _settle(self: DecodeMemo) -> None:
        """`settle` holding the lock."""
        waiting, self._unsized = self._unsized, None
        if waiting is None:
            return
        key, held, known = waiting
        size, held.narrow = self._held_size(held.body, held.values, len(held.parts), known)
        if size <= self._items_max:
            held.size = size
            self._on_probation(key, held)

    def _held_size(
        self: DecodeMemo, raw: bytes, values: int | None, count: int, known: tuple[int, int] | None = None
    ) -> tuple[int, bool | None]:
        """At least what `raw` held and what its `count` items decode to hold, and what their turn
        holds once read in parts: without a scan for \\u escapes (every string taken as wide)
        unless that bound leaves it out of the budget; and `narrow(raw)` when scanned (else None).
        `values`: at least the JSON values `raw` holds, when counted already. `known`: a run of
        `raw` known narrow, not scanned again (a long agent body is mostly the last turn's)."""
        if values is None:
            values = value_bound(raw, 0, len(raw))
        size = body_turn_size(raw, values, count, 0, narrow_text=False)
        if size <= self._items_max:
            return size, None
        is_narrow = narrow(raw) if known is None else narrow_around(raw, *known)
        return body_turn_size(raw, values, count, 0, narrow_text=is_narrow), is_narrow


def first_key(opening: tuple[str, int]) -> tuple[str, bytes, bytes]:
    """Where a held list waits on probation: never an opening of items (no JSON text is NUL)."""
    return (opening[0], b"\0", opening[1].to_bytes(8, "little", signed=True))
