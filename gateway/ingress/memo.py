"""Decode each transcript item once: what a dialect made of a message, kept under the exact bytes
the client sent for it.

An agent loop re-sends its whole history every turn, so without this the gateway would validate
and decode the same thousand messages on every request. Decoding an item is a pure function of
its bytes (the sealer's key is fixed for the process and no clock is read), so a decoded item
found under the same bytes is the one decoding would produce again: the transcript, and every
byte sent upstream, is identical with and without the memo (tests/ingress/test_memo.py proves it).
What is kept is immutable (the canonical model is frozen), so requests share it safely.

Entries are scoped by dialect and tenant (one tenant never learns from timing what another sent).

Admission on evidence of reuse, as a segmented LRU: an item decoded for the first time is kept on
probation (it costs nothing to keep: the request decoded it anyway); found again there, it has
shown it is reused and moves to the protected segment. Probation is what the protected entries
leave of the budget, and at least a quarter of it: traffic that never repeats churns probation
only, and never pushes the items of a live agent session out. An agent's next turn finds its
whole history (the turn before put it on probation), so a warm turn decodes only what is new.

The budget counts what entries hold, bounded from their bytes without walking what they decoded
to (`bound_size`: walking a thousand messages took longer than decoding them): the key's bytes,
the decoded strings (never more characters than the JSON text held, in bytes for an ASCII text
without \\u escapes, four times that otherwise), a fixed cost per JSON value for the objects
(the most a canonical block costs per value, checked against `deep_size` on generated
transcripts of every memoized dialect: tests/ingress/test_memo.py), plus the LRU's own cost per
entry, times what the allocator loses around them (calibrated against RSS by bench/memo.py).

The memo also owns the JSON depth check of the items: `parse_json_body` skips the transcript
list and an item is walked only when it is new; an item found under its bytes had the same shape
when it was first checked.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable
from enum import Enum
from typing import Any, Generic, TypeVar

import orjson

from gateway.ingress.budget import Known, item_parts
from gateway.ingress.errors import check_depth

T = TypeVar("T")

# what an entry costs beyond its key's bytes and its decoded objects: the key and value tuples,
# the size and part count, the OrderedDict's slot and links (measured at ~280 bytes with tracemalloc)
_OVERHEAD = 320
# the most the canonical objects cost per JSON value (a container or a separator) of the item
# they were decoded from, and per item (a message, its tuple of blocks, a block): the bound's
# constants (tests/ingress/test_memo.py checks the bound holds on generated transcripts)
_PER_VALUE = 96
_PER_ITEM = 512
# RSS over the bytes the objects hold: what an entry leaves unusable around it in the
# allocator's pools once entries come and go (measured with bench/memo.py: RSS growth was 1.26x
# to 1.40x the tracemalloc-measured size for agent and for short chat transcripts)
_RSS_FACTOR = 1.3
# probation keeps at least this share of the budget, whatever the protected entries hold
_PROBATION_SHARE = 4
_ATOMIC = (str, bytes, int, float)
_SHARED = (bool, type(None), Enum)


def deep_size(value: Any) -> int:
    """The bytes `value` and everything it refers to hold (each object once): strings, numbers,
    tuples, lists, dicts, and objects with __slots__ or a __dict__. Shared singletons (None, bools,
    enum members) cost nothing."""
    seen: set[int] = set()
    stack = [value]
    total = 0
    getsizeof = sys.getsizeof
    while stack:
        obj = stack.pop()
        if isinstance(obj, _SHARED) or id(obj) in seen:
            continue
        seen.add(id(obj))
        total += getsizeof(obj)
        if isinstance(obj, _ATOMIC):
            continue
        if isinstance(obj, tuple | list | set | frozenset):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        else:
            for cls in type(obj).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if hasattr(obj, name):
                        stack.append(getattr(obj, name))
            attrs = getattr(obj, "__dict__", None)
            if attrs is not None:
                stack.append(attrs)
    return total


def bound_size(raw: bytes) -> int:
    """At least what an item decoded from the JSON text `raw` holds, its canonical objects and
    strings (not the key): a string never holds more characters than its JSON literal has bytes,
    one byte each when the text is ASCII without \\u escapes (which can widen a whole string)."""
    narrow = raw.isascii() and b"\\u" not in raw
    chars = len(raw) if narrow else 4 * len(raw)
    values = raw.count(b"{") + raw.count(b"[") + raw.count(b",")
    return chars + _PER_VALUE * values + _PER_ITEM


class DecodeMemo:
    """The process's memo; `max_bytes` 0 turns it off (every item is decoded, as before).
    `admit_after`: how many sightings of an item's bytes make it protected (2: on evidence of
    reuse, on probation until then; 1: at once).

    Least-recently-used maps on OrderedDicts (their lookups and moves are C code: cachetools'
    LRUCache, pure Python, cost more per item than decoding saved on short messages)."""

    def __init__(self, max_bytes: int, *, admit_after: int = 2) -> None:
        if admit_after not in (1, 2):
            raise ValueError("admit_after is 1 or 2")
        self.max_bytes = max_bytes
        # (scope, bytes) -> (size, decoded): items seen once, and items seen again
        self._probation: OrderedDict[tuple[str, bytes], tuple[int, Any]] = OrderedDict()
        self._protected: OrderedDict[tuple[str, bytes], tuple[int, Any]] = OrderedDict()
        self._on = max_bytes > 0
        self._admit_after = admit_after
        # admitted at once: one LRU over the whole budget
        self._protected_max = max_bytes - max_bytes // _PROBATION_SHARE if admit_after == 2 else max_bytes
        self._scopes: dict[str, str] = {}  # one string per scope, shared by its entries' keys
        self._probation_size = 0
        self._protected_size = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._probation) + len(self._protected)

    @property
    def size(self) -> int:
        """What the entries hold, as counted against `max_bytes`."""
        return self._probation_size + self._protected_size

    @property
    def protected(self) -> int:
        """Entries that have shown they are reused."""
        return len(self._protected)

    def items(self, scope: str, values: list[Any], max_depth: int) -> Items[Any]:
        """The transcript items of one request (`values`: a list in a top-level field of the
        body), each looked up under its JSON text written out again: found ones carry their
        decoded value; new ones are depth-checked here against the body's `max_depth`, each at its
        place (the body 1, the list 2, an item 3)."""
        keys: list[tuple[str, bytes] | None] = []
        found: list[Any] = []
        if self._on:
            scope = self._scopes.setdefault(scope, scope)
            for value in values:
                try:
                    key: tuple[str, bytes] | None = (scope, orjson.dumps(value))
                except orjson.JSONEncodeError:  # nested past what orjson writes: never kept
                    key = None
                keys.append(key)
                hit = self._find(key) if key is not None else None
                found.append(hit[0] if hit is not None else None)
        else:
            keys = [None] * len(values)
            found = [None] * len(values)
        for value, decoded in zip(values, found, strict=True):
            if decoded is None:
                check_depth(value, max_depth, start=3)
        return self._counted(Items(self, keys, found, [item_parts(v) for v in values]))

    @property
    def enabled(self) -> bool:
        return self._on

    def split(self, scope: str, raws: list[bytes], body: bytes) -> tuple[list[Any], Items[Any]] | None:
        """The transcript items of one request from their JSON texts as the client sent them
        (`gateway/ingress/split.py`): the values to put in the body (a found item stays unparsed:
        `Known` stands for it) and the items. None: a new item is not JSON orjson reads (the
        caller parses the body whole, for orjson's own error). The caller depth-checks the new
        items (`Items.check_depth`), in the order parsing the body whole does. `body`: the whole
        body, parsed again only to report a validation error (`Items.whole`)."""
        if not self._on:
            return None
        scope = self._scopes.setdefault(scope, scope)
        keys: list[tuple[str, bytes] | None] = [(scope, raw) for raw in raws]
        hits = [self._find((scope, raw)) for raw in raws]
        values: list[Any] = []
        loads = orjson.loads
        try:
            for raw, hit in zip(raws, hits, strict=True):
                values.append(loads(raw) if hit is None else Known(hit[1]))
        except orjson.JSONDecodeError:
            return None
        parts = [value.parts if type(value) is Known else item_parts(value) for value in values]
        found = [hit[0] if hit is not None else None for hit in hits]
        return values, self._counted(Items(self, keys, found, parts, body))

    def _counted(self, items: Items[Any]) -> Items[Any]:
        hits = sum(1 for value in items.found if value is not None)
        self.hits += hits
        self.misses += len(items.found) - hits
        return items

    def _find(self, key: tuple[str, bytes]) -> Any:
        """The decoded value and raw parts kept under `key` (a hit on probation protects it)."""
        entry = self._protected.get(key)
        if entry is not None:
            self._protected.move_to_end(key)
            return entry[1]
        entry = self._probation.pop(key, None)
        if entry is None:
            return None
        self._probation_size -= entry[0]  # evidence of reuse
        self._protect(key, entry)
        return entry[1]

    def _protect(self, key: tuple[str, bytes], entry: tuple[int, Any]) -> None:
        protected = self._protected
        protected[key] = entry
        self._protected_size += entry[0]
        # over its share: the least recently used go back on probation, for one more chance
        while self._protected_size > self._protected_max and protected:
            old_key, old = protected.popitem(last=False)
            self._protected_size -= old[0]
            self._probation[old_key] = old
            self._probation_size += old[0]
        self._evict()

    def _keep(self, key: tuple[str, bytes], decoded: Any, parts: int) -> None:
        raw = key[1]
        # a copy of exactly its size: orjson's output holds up to ten times its length in memory
        key = (key[0], bytes(memoryview(raw)))
        size = int((sys.getsizeof(raw) + bound_size(raw) + _OVERHEAD) * _RSS_FACTOR)
        if size > self.max_bytes:
            return
        for segment in (self._protected, self._probation):
            old = segment.pop(key, None)
            if old is not None:  # decoded twice in one request (the same bytes at two places)
                if segment is self._protected:
                    self._protected_size -= old[0]
                else:
                    self._probation_size -= old[0]
        if self._admit_after == 1:
            self._protect(key, (size, (decoded, parts)))
            return
        self._probation[key] = (size, (decoded, parts))
        self._probation_size += size
        self._evict()

    def _evict(self) -> None:
        probation, protected = self._probation, self._protected
        while probation and self.size > self.max_bytes:
            _, (evicted, _) = probation.popitem(last=False)
            self._probation_size -= evicted
        while protected and self.size > self.max_bytes:  # admitted at once: a plain LRU
            _, (evicted, _) = protected.popitem(last=False)
            self._protected_size -= evicted


class Items(Generic[T]):
    """One request's transcript items, as `DecodeMemo.items` found them."""

    __slots__ = ("_memo", "_keys", "_parts", "_body", "found")

    def __init__(
        self,
        memo: DecodeMemo,
        keys: list[tuple[str, bytes] | None],
        found: list[T | None],
        parts: list[int],
        body: bytes | None = None,
    ) -> None:
        self._memo = memo
        self._keys = keys
        self._parts = parts
        self._body = body  # the raw body, when found items were left unparsed (`DecodeMemo.split`)
        self.found = found  # per item: its decoded value, or None when it is new

    def check_depth(self, values: list[Any], max_depth: int) -> None:
        """Depth-check the new items of `values` (the body's list), each at its place (the body 1,
        the list 2, an item 3)."""
        for value, decoded in zip(values, self.found, strict=True):
            if decoded is None:
                check_depth(value, max_depth, start=3)

    def whole(self, body: Any) -> Any:
        """`body` with every item parsed: what a validation error of the whole request is
        reported from (a found item stands unparsed in `body`)."""
        if self._body is None:
            return body
        try:
            return orjson.loads(self._body)
        except orjson.JSONDecodeError:  # nested past what orjson reads at once: its parts were read
            return body

    def decode(self, index: int, decode: Callable[[], T]) -> T:
        """Item `index` decoded: as found, or by `decode()` and then kept (a decode that raises
        keeps nothing: errors are reported with the item's place, which the memo does not know)."""
        value = self.found[index]
        if value is None:
            value = decode()
            key = self._keys[index]
            if key is not None:
                self._memo._keep(key, value, self._parts[index])
        return value


def fresh_items(count: int) -> Items[Any]:
    """Items none of which is known, kept nowhere: decoding outside an exchange (tests, tools,
    count_tokens), whose body `parse_json_body` depth-checked whole."""
    return Items(_NOWHERE, [None] * count, [None] * count, [1] * count)


_NOWHERE = DecodeMemo(0)
