"""The decode memo's turns that go on from a held list (gateway/ingress/memo.py): an agent's next
turn re-sends the last one's list and adds to it, so the held list's bytes are compared with the
new list's first ones at once (one `startswith`: gateway/ingress/slices.py `continued`), and
what the held items decoded to stands for them; only the items after are parsed and decoded.
The new list, with what its items decode to, is then held in the old one's place, for the turn
after.

What is held: the body of a long first sight (`first_sight`) or of a long turn read item by
item (`hold`), or the list of a turn that went on (`chain`); one per opening, on probation (a
`_FirstSight` under `first_key`), found by the next request's `admit` that opens the same way.
Anything else (an edited or dropped item, a held item whose decode raised or was never asked
for) reads the request item by item as before (`DecodeMemo.split`), the held list too.
"""

from __future__ import annotations

from itertools import repeat
from operator import is_
from typing import TYPE_CHECKING, Any

from gateway.ingress.budget import item_parts, known, value_bound
from gateway.ingress.memo_items import Items, _FirstSight
from gateway.ingress.memo_size import body_turn_size
from gateway.ingress.slices import last_item_end, went_on

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
        self: DecodeMemo, listed: Any, body: bytes, values: int | None
    ) -> tuple[list[Any], Items[Any]] | None:
        """The transcript items of a request whose list (`listed`, its raw text) goes on from the
        one `admit` found held under the same opening, and the values to put in the body (`Known`
        for a held item); the list is held in its place. None: not such a request. `values`: at
        least the JSON values `body` holds, when counted already."""
        pending = self._pending
        if pending is None:
            return None
        opening, sight = pending
        records = sight.records
        if any(map(is_, records, repeat(None))):  # an item not decoded (or refused): no value
            return None
        found = went_on(sight.body, sight.field, sight.end, listed)
        if found is None:
            return None
        text, new = found
        self._pending = None
        knowns = sight.knowns
        if knowns is None:
            knowns = [known(parts) for parts in sight.parts]
        parts = [item_parts(value) for value in new]
        count = len(records) + len(new)
        items: Items[Any] = Items(
            self, [None] * count, [*records, *([None] * len(new))], [*sight.parts, *parts], body
        )
        self.hits += len(records)
        self.misses += len(new)
        self._hold(opening, text, None, items, values, [*knowns, *map(known, parts)], body)
        return [*knowns, *new], items

    def hold(
        self: DecodeMemo,
        opening: tuple[str, int] | None,
        body: bytes,
        field: str,
        items: Items[Any],
        values: int | None,
    ) -> None:
        """A long request read item by item (`split`: its items found or new), its body held for
        the next turn opening as `opening` to go on from (`chain`: its list is found in it then,
        as a first sight's is; copying the list now would cost more)."""
        if opening is not None and len(items.found) >= LONG_TRANSCRIPT and items._record is None:
            self._hold(opening, body, field, items, values, None, body)

    def _hold(
        self: DecodeMemo,
        opening: tuple[str, int],
        text: bytes,
        field: str | None,
        items: Items[Any],
        values: int | None,
        knowns: list[Any] | None,
        whole: bytes,
    ) -> None:
        """The list `text` (or the body `text` holding it in `field`) held under `opening`, with
        what `items` found or decode (on probation, in place of what was held there). `whole`: the
        request's body (`text` or the one holding it), held too when `values` counted it: the
        next turn's body is counted from it (`DecodeMemo.held_bound`)."""
        size = self._held_size(text, values, len(items.found))
        if values is not None and whole is not text:
            size += len(whole)
        if size <= self._items_max:
            held = _FirstSight(text, field, items._parts, size)
            if values is not None:
                held.whole, held.whole_values = whole, values
            held.records = [*items.found]
            if field is None:
                held.end = last_item_end(text)
            held.knowns = knowns
            items._record = held.records
            self._on_probation(first_key(opening), held)

    def _held_size(self: DecodeMemo, raw: bytes, values: int | None, count: int) -> int:
        """At least what `raw` held and what its `count` items decode to hold, and what their turn
        holds once read in parts: without a scan for \\u escapes (every string taken as wide)
        unless that bound leaves it out of the budget. `values`: at least the JSON values `raw`
        holds, when counted already."""
        if values is None:
            values = value_bound(raw, 0, len(raw))
        size = body_turn_size(raw, values, count, 0, scan=False)
        return size if size <= self._items_max else body_turn_size(raw, values, count, 0)


def first_key(opening: tuple[str, int]) -> tuple[str, bytes, bytes]:
    """Where a held list waits on probation: never an opening of items (no JSON text is NUL)."""
    return (opening[0], b"\0", opening[1].to_bytes(8, "little", signed=True))
