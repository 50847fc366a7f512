"""Decode each transcript item once: what a dialect made of a message, kept under the exact bytes
the client sent for it.

An agent loop re-sends its whole history every turn, so without this the gateway would validate
and decode the same thousand messages on every request. Decoding an item is a pure function of
its bytes (the sealer's key is fixed for the process and no clock is read), so a decoded item
found under the same bytes is the one decoding would produce again: the transcript, and every
byte sent upstream, is identical with and without the memo (tests/ingress/test_memo.py proves it).
What is kept is immutable (the canonical model is frozen), so requests share it safely.

Entries are scoped by dialect and tenant (one tenant never learns from timing what another sent).

Admission on evidence of reuse, in two steps. First sight: a request whose opening (its first two
items, found by a bounded scan of its bytes: `admit`) was not seen lately in its scope is parsed
whole and decoded as without the memo, and its opening remembered as a hash in a table bounded by
a share of the budget; reading a body in parts and keeping its items cost 30-40% more than
parsing it whole (bench/memo.py), which traffic that never repeats must not pay. A long
transcript (`_LONG_TRANSCRIPT` items: it went on before) is the exception: at first sight its
body and what its items decoded to wait on probation whole, read in parts only when the next turn
opens the same way (`_recall`), so that turn finds them (a body whose bound needs a pass over
its bytes is bounded once its answer is on its way: `settle`). Second sight: the new items of a
request are kept together on probation (one entry per request: the request decoded them anyway),
under the request's opening items. A later request of the same scope that opens the same way is
the same conversation going on: that turn's items are protected then, and found by their bytes
from then on. An agent's third turn finds its whole history this way; probation churns with
conversations that stop: older turns on probation go first, protected items only when one
request's new items need more room than probation has. Protected items take at most three
quarters of the budget (but for one turn larger than that), the least recently used turn going
first. A first message shared by unrelated requests (a long system prompt sent with one-off
questions) is evidence too when it alone fills the opening's scan: such traffic is read in parts.

The budget counts what entries hold, bounded from their bytes without walking what they decoded
to (`bound_size`: walking a thousand messages took longer than decoding them): the key's bytes,
the decoded strings (never more characters than the JSON text held, in bytes for an ASCII text
without \\u escapes, four times that otherwise), a fixed cost per JSON value for the objects
(the most a canonical block costs per value, checked against `deep_size` on generated
transcripts of every memoized dialect: tests/ingress/test_memo.py), plus the LRU's own cost per
entry, times what the allocator loses around them (calibrated against RSS by bench/memo.py).

The event loop's thread and the worker thread of large bodies (gateway/offload.py) share the
memo: whoever admits, splits or looks up holds `lock` (gateway/ingress/split.py `parse_shared`; the
loop never waits for it). What decoding keeps afterwards goes into lists no other request reads
until it is protected (appends, atomic under the interpreter's lock).

The memo also owns the JSON depth check of the items: `parse_json_body` skips the transcript
list and an item is walked only when it is new; an item found under its bytes had the same shape
when it was first checked.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, TypeVar

import orjson

from gateway.ingress.budget import Known, Shared, item_parts, known
from gateway.ingress.errors import check_depth
from gateway.ingress.memo_chain import LONG_TRANSCRIPT as _LONG_TRANSCRIPT
from gateway.ingress.memo_chain import Chains, first_key
from gateway.ingress.memo_items import Items, _FirstSight, _Turn
from gateway.ingress.memo_size import body_turn_size, entry_size, turn_size
from gateway.ingress.slices import held_items, list_span, opening_hash, shared_with

T = TypeVar("T")

# probation keeps at least this share of the budget, whatever the protected entries hold
_PROBATION_SHARE = 4
# what remembering an opening costs (a key tuple of the shared scope and a hash, in an
# OrderedDict: ~200 bytes with tracemalloc), and the budget's share the remembered openings take
_SEEN_ENTRY = 240
_SEEN_SHARE = 20
# the gateway's `min_bytes`: one short message costs 15 us to parse and decode whole, 26 us through
# the memo (the opening's scan, the body read in parts, lookups): even at ~3 messages (~300 bytes)
SHORT_BODY = 512


class DecodeMemo(Chains):
    """The process's memo; `max_bytes` 0 turns it off (every item is decoded, as before); a body
    shorter than `min_bytes` is parsed whole and decoded as without it (the gateway's: SHORT_BODY).
    `admit_after`: 2: a request's new items are kept on probation together and protected when a
    later request of the same scope opens with the same items (evidence of reuse); 1: every
    decoded item is protected at once.

    Least-recently-used maps on OrderedDicts (their lookups and moves are C code: cachetools'
    LRUCache, pure Python, cost more per item than decoding saved on short messages), whose unit is
    a conversation: a hit touches its item's conversation, and a conversation leaves whole."""

    def __init__(self, max_bytes: int, *, admit_after: int = 2, min_bytes: int = 0) -> None:
        if admit_after not in (1, 2):
            raise ValueError("admit_after is 1 or 2")
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes  # a shorter body is parsed and decoded as without the memo
        # the openings seen (`seen`) take their share of the budget, the items the rest
        self._seen_max = max_bytes // (_SEEN_SHARE * _SEEN_ENTRY) if admit_after == 2 else 0
        self._items_max = max_bytes - self._seen_max * _SEEN_ENTRY
        # (scope, bytes) -> (decoded, its raw parts as `Known`, its turn): the protected items
        self._index: dict[tuple[str, bytes], tuple[Any, Known, _Turn]] = {}
        # opening -> the conversation's protected items, least recently used first
        self._protected: OrderedDict[tuple[str, bytes, bytes], _Turn] = OrderedDict()
        # (scope, first item's bytes, second item's bytes) -> the new items of the last request
        # that opened so
        # (scope, b"\0", an opening's hash) -> the request that opened so first (`_FirstSight`)
        self._probation: OrderedDict[tuple[str, bytes, bytes], _Turn | _FirstSight] = OrderedDict()
        self._on = max_bytes > 0
        self._admit_after = admit_after
        # probation keeps at least its share of the budget (admitted at once: one LRU over all)
        items_max = self._items_max
        self._protected_max = items_max - items_max // _PROBATION_SHARE if admit_after == 2 else items_max
        self._scopes: dict[str, str] = {}  # one string per scope, shared by its entries' keys
        self._probation_size = 0
        self._protected_size = 0
        # (scope, hash of an opening) -> None: the openings seen lately, least recently first
        self._seen: OrderedDict[tuple[str, int], None] = OrderedDict()
        self.hits = 0
        self.misses = 0
        # held by whoever admits, splits or looks up (gateway/ingress/split.py `parse_shared`): the event
        # loop's thread and the worker thread of large bodies
        self.lock = threading.Lock()
        # a first sight `admit` found held for the request it admitted, read in parts by the
        # `split` or `items` of that request (or the next `admit`)
        self._pending: tuple[tuple[str, int], _FirstSight] | None = None
        # a body to hold whose bound waits for a pass over its bytes, placed after its request's
        # answer (`settle`): where it goes, it, and a run of it known narrow
        self._unsized: tuple[tuple[str, bytes, bytes], _FirstSight, tuple[int, int] | None] | None = None

    def __len__(self) -> int:
        return sum(len(turn.entries) for turn in self._probation.values()) + len(self._index)

    @property
    def size(self) -> int:
        """What the entries hold, as counted against `max_bytes` (less the share of the openings
        remembered as seen, at most `max_bytes / _SEEN_SHARE`)."""
        return self._probation_size + self._protected_size

    @property
    def protected(self) -> int:
        """Entries that have shown they are reused."""
        return len(self._index)

    @property
    def enabled(self) -> bool:
        return self._on

    def admit(self, scope: str, raw: bytes, field: str) -> tuple[bool, tuple[str, int] | None]:
        """Whether a request of `scope` opened as `raw` does (its transcript `field`'s first two
        values, by a bounded scan of its bytes) was seen lately: the evidence of reuse that an
        exchange needs before it reads a body in parts. A first sight is remembered (a hash, the
        opening's key returned with False), and the body is parsed whole and decoded as without
        the memo (`first_sight`). When admitting at once, every request is taken as seen."""
        if not self._on:
            return False, None
        if self._admit_after == 1:
            return True, None
        self._settle()
        found = opening_hash(raw, field)
        if found is None:
            return False, None
        key = (self._scopes.setdefault(scope, scope), found)
        table = self._seen
        if key in table:
            table.move_to_end(key)
            self._recall_pending()
            sight = self._probation.pop(first_key(key), None)
            if sight is not None:
                # read in parts by the `split` or `items` that follows: the items of this body
                # show where the held one's are
                self._probation_size -= sight.size
                self._pending = (key, sight)
            return True, key
        table[key] = None
        if len(table) > self._seen_max:
            table.popitem(last=False)
        return False, key

    def held_bound(self, scope: str, raw: bytes, field: str) -> Shared | None:
        """What `raw` shares with the body held for the conversation it opens as (a request of
        `scope`, its transcript in `field`), with that body's `value_bound`: what
        `values_within_budget` counts `raw` from (gateway/ingress/budget.py `value_bound_after`)
        and `chain` goes on from without comparing again. Reads only (`admit` finds the held list
        afterwards); None when there is none or the worker thread holds the memo."""
        if not self._on or self._admit_after != 2 or len(raw) < self.min_bytes:
            return None
        if not self.lock.acquire(blocking=False):
            return None
        try:
            self._settle()
            found = opening_hash(raw, field)
            if found is None:
                return None
            sight = self._probation.get(first_key((scope, found)))
            if type(sight) is not _FirstSight or sight.values is None:
                return None
            held, values, span = sight.body, sight.values, sight.span
        finally:
            self.lock.release()
        # bytes never change: no lock needed. Where the held list is, found once (`chain` would
        # find it for this turn anyway): the comparison then finds it where a field before it
        # changed length (another thread finding it too sets the same value)
        if span is None:
            span = sight.span = list_span(held, field)
        return shared_with(raw, held, values, span, field)

    def first_sight(
        self,
        values: list[Any],
        max_depth: int,
        raw: bytes,
        field: str,
        opening: tuple[str, int] | None,
        body_values: int | None = None,
        span: tuple[int, int] | None = None,
    ) -> Items[Any]:
        """The items of a request (`values`, parsed whole from `raw`) whose opening was not seen
        (`admit`): decoded and depth-checked as without the memo. A long transcript remembered
        under `opening`: the body and what its items decode to wait on probation for the next
        request that opens so (its bytes are not read again unless one does). `body_values`: at
        least the JSON values `raw` holds, when counted already. `span`: given when every item is a
        dialect's Struct (gateway/ingress/typed_items.py `typed_read`), where the list is in `raw`
        (`list_span`: the next turn need not read `raw` again to find it); such items count one
        part each, as `item_parts` counts a non-dict, and nest within the bound `typed_read`
        checked, so the list needs no walk."""
        count = len(values)
        if span is not None:
            parts = [1] * count
        else:
            parts = [item_parts(v) for v in values]
            check_depth(values, max_depth, start=2)  # every item new: one walk of the list (item: 3)
        items: Items[Any] = Items(self, [None] * count, [None] * count, parts)
        self.misses += count
        if opening is None or count < _LONG_TRANSCRIPT:
            return items
        sight = _FirstSight(raw, field, parts, 0)
        sight.values = body_values
        sight.span = span
        items._record = sight.records
        self._place(first_key(opening), sight, None)
        return items

    def _recall(self, opening: tuple[str, int], raws: list[bytes] | None = None) -> None:
        """The request that first opened as `opening` names, if still on probation, read in parts
        (`raws`: the items of the request opening the same way now, when read in parts)."""
        sight = self._probation.pop(first_key(opening), None)
        if sight is not None:
            self._probation_size -= sight.size
            self._read(opening, sight, raws)

    def _recall_pending(self, raws: list[bytes] | None = None) -> None:
        """What `admit` found held for the request now parsed (`raws`: its items, when read in
        parts), read in parts."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._read(*pending, raws)

    def _read(self, opening: tuple[str, int], sight: _Turn | _FirstSight, raws: list[bytes] | None) -> None:
        """A first sight read in parts (`held_items`: from `raws` when they show its list): its
        decoded items go on probation as its turn, under its opening items (what a request opening
        the same way finds, and protects)."""
        assert type(sight) is _FirstSight
        texts = held_items(sight.body, sight.field, len(sight.parts), raws)
        if texts is None:
            return
        scope = opening[0]
        turn = _Turn(sight.size)
        turn.entries = [
            ((scope, raw), value, parts)
            for raw, value, parts in zip(texts, sight.records, sight.parts, strict=True)
            if value is not None
        ]
        if not turn.entries:
            return
        turn.opening = self._opening(scope, texts)
        self._on_probation(turn.opening, turn)

    def _on_probation(self, key: tuple[str, bytes, bytes], turn: _Turn | _FirstSight) -> None:
        """`turn` on probation under `key`, in place of what was there; older turns go when the
        budget is full."""
        old = self._probation.pop(key, None)
        if old is not None:
            self._probation_size -= old.size
        self._probation[key] = turn
        self._probation_size += turn.size
        self._evict(turn)

    def items(self, scope: str, values: list[Any], max_depth: int) -> Items[Any]:
        """The transcript items of one request (`values`: a list in a top-level field of the
        body), each looked up under its JSON text written out again: found ones carry their
        decoded value; new ones are depth-checked here against the body's `max_depth`, each at its
        place (the body 1, the list 2, an item 3)."""
        self._recall_pending()
        parts = [item_parts(v) for v in values]
        if not self._on:
            items: Items[Any] = Items(self, [None] * len(values), [None] * len(values), parts)
        else:
            raws: list[bytes | None] = []
            for value in values:
                try:
                    # a copy of exactly its size: orjson's output holds up to ten times its length
                    raws.append(bytes(memoryview(orjson.dumps(value))))
                except orjson.JSONEncodeError:  # nested past what orjson writes: never kept
                    raws.append(None)
            scope = self._scopes.setdefault(scope, scope)
            opening = self._opening(scope, raws)
            hits = self._hits(scope, raws, opening)
            kept = [raw if hit is None else None for raw, hit in zip(raws, hits, strict=True)]
            items = self._lookup(scope, kept, parts, None, hits, opening)
        items.check_depth(values, max_depth)
        return self._counted(items)

    def split(
        self, scope: str, raws: list[bytes], body: bytes, values: int | None = None
    ) -> tuple[list[Any], Items[Any]] | None:
        """The transcript items of one request from their JSON texts as the client sent them
        (`gateway/ingress/split.py`): the values to put in the body (a found item stays unparsed:
        `Known` stands for it) and the items. None: a new item is not JSON orjson reads (the
        caller parses the body whole, for orjson's own error). The caller depth-checks the new
        items (`Items.check_depth`), in the order parsing the body whole does. `body`: the whole
        body, parsed again only to report a validation error (`Items.whole`). `values`: at least
        the JSON values the body holds, when counted already (a turn of most of the body is
        accounted from it)."""
        if not self._on:
            return None
        self._recall_pending(raws)
        parsed: list[Any] = []
        loads = orjson.loads
        scope = self._scopes.setdefault(scope, scope)
        opening = self._opening(scope, raws)
        hits = self._hits(scope, raws, opening)
        try:
            for raw, hit in zip(raws, hits, strict=True):
                parsed.append(loads(raw) if hit is None else hit[1])
        except orjson.JSONDecodeError:
            return None
        parts = [value.parts if type(value) is Known else item_parts(value) for value in parsed]
        kept = [raw if hit is None else None for raw, hit in zip(raws, hits, strict=True)]
        return parsed, self._counted(self._lookup(scope, kept, parts, body, hits, opening, values))

    def _hits(
        self, scope: str, raws: list[bytes] | list[bytes | None], opening: tuple[str, bytes, bytes]
    ) -> list[tuple[Any, Known, _Turn] | None]:
        """Each item's protected (decoded, Known, turn), or None. When one is missing and a turn on
        probation opened as this request does, that turn is protected first."""
        get, touch = self._index.get, self._protected.move_to_end
        if (
            raws
            and raws[-1] is not None
            and (scope, raws[-1]) not in self._index
            and self._continues(opening)
        ):
            # a new last item (an agent's turn): the turn on probation protected first, found in
            # one pass
            return self._hits(scope, raws, opening)
        hits: list[tuple[Any, Known, _Turn] | None] = []
        missing = False
        for raw in raws:
            entry = get((scope, raw)) if raw is not None else None
            if entry is not None:
                touch(entry[2].opening)
                hits.append(entry)
            else:
                hits.append(None)
                missing = True
        if missing and raws and self._continues(opening):
            return self._hits(scope, raws, opening)
        return hits

    def _continues(self, opening: tuple[str, bytes, bytes]) -> bool:
        """Whether a turn on probation opened as `opening` (evidence of reuse: the conversation
        goes on), which is protected now."""
        if self._admit_after != 2 or type(self._probation.get(opening)) is not _Turn:
            return False
        turn = self._probation.pop(opening)
        self._probation_size -= turn.size
        self._protect(turn, opening)
        return True

    @staticmethod
    def _opening(scope: str, raws: list[bytes] | list[bytes | None]) -> tuple[str, bytes, bytes]:
        """What a request's turn is kept under on probation: its first two items' bytes."""
        first = raws[0] if raws else None
        second = raws[1] if len(raws) > 1 else None
        return (scope, first or b"", second or b"")

    def _lookup(
        self,
        scope: str,
        kept: list[bytes | None],
        parts: list[int],
        body: bytes | None,
        hits: list[tuple[Any, Known, _Turn] | None],
        opening: tuple[str, bytes, bytes],
        values: int | None = None,
    ) -> Items[Any]:
        """`kept`: the bytes each new item is kept under (None: found, or never kept)."""
        keys = [(scope, raw) if raw is not None else None for raw in kept]
        found = [hit[0] if hit is not None else None for hit in hits]
        turn = None
        if self._admit_after == 2:
            new = [raw for raw in kept if raw is not None]
            # the opening's bytes are held too (shared with the first items' keys when new)
            if body is not None and values is not None and 2 * sum(map(len, new)) > len(body):
                # most of the body: its own count of values, rather than another pass over it
                size = body_turn_size(body, values, len(new), len(opening[1]) + len(opening[2]))
            else:
                size = turn_size([*new, opening[1], opening[2]]) if new else 0
            if new and size <= self._items_max:
                turn = _Turn(size)
                turn.opening = opening
                self._on_probation(opening, turn)
        return Items(self, keys, found, parts, body, turn)

    def _counted(self, items: Items[Any]) -> Items[Any]:
        hits = sum(1 for value in items.found if value is not None)
        self.hits += hits
        self.misses += len(items.found) - hits
        return items

    def _protect(self, turn: _Turn, opening: tuple[str, bytes, bytes]) -> None:
        """`turn`'s items join the protected items of the conversation `opening` names."""
        conversation = self._protected.get(opening)
        if conversation is None:
            conversation = self._protected[opening] = turn
            turn.opening = opening
        else:
            conversation.size += turn.size
            self._protected.move_to_end(opening)
        index = self._index
        for key, decoded, parts in turn.entries:
            old = index.get(key)
            index[key] = (decoded, known(parts), conversation)
            if old is None or old[2] is not conversation:
                conversation.keys.append(key)
        turn.entries = []
        self._protected_size += turn.size
        # over its share: older conversations go, never this one (a long transcript's history,
        # larger than the share, is protected alone as long as it fits the budget)
        while self._protected_size > self._protected_max and len(self._protected) > 1:
            self._drop_oldest()
        self._evict()

    def _drop_oldest(self) -> None:
        _, turn = self._protected.popitem(last=False)
        self._protected_size -= turn.size
        index = self._index
        for key in turn.keys:
            entry = index.get(key)
            if entry is not None and entry[2] is turn:  # a later turn may hold the same bytes
                del index[key]

    def _keep(self, key: tuple[str, bytes], decoded: Any, parts: int) -> None:
        """Admitted at once (`admit_after` 1): a turn of one item (while decoding: the lock is
        not held)."""
        size = entry_size(key[1])
        if size <= self._items_max:
            turn = _Turn(size)
            turn.entries.append((key, decoded, parts))
            with self.lock:
                self._protect(turn, (key[0], key[1], b""))

    def _evict(self, newest: _Turn | _FirstSight | None = None) -> None:
        """Back within the budget: older turns on probation first, then the least recently used
        conversations; `newest`, the turn just put on probation, only if nothing else is left."""
        probation = self._probation
        while probation and self.size > self._items_max:
            opening, turn = next(iter(probation.items()))
            if turn is newest:
                break
            del probation[opening]
            self._probation_size -= turn.size
        while self._protected and self.size > self._items_max:  # `newest` fits the budget alone
            self._drop_oldest()


def fresh_items(count: int) -> Items[Any]:
    """Items none of which is known, kept nowhere: decoding outside an exchange (tests, tools,
    count_tokens), whose body `parse_json_body` depth-checked whole."""
    return Items(_NOWHERE, [None] * count, [None] * count, [1] * count)


_NOWHERE = DecodeMemo(0)
