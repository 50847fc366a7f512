"""Decode each transcript item once: what a dialect made of a message, kept under the exact bytes
the client sent for it.

An agent loop re-sends its whole history every turn, so without this the gateway would validate
and decode the same thousand messages on every request. Decoding an item is a pure function of
its bytes (the sealer's key is fixed for the process and no clock is read), so a decoded item
found under the same bytes is the one decoding would produce again: the transcript, and every
byte sent upstream, is identical with and without the memo (tests/ingress/test_memo.py proves it).
What is kept is immutable (the canonical model is frozen), so requests share it safely.

Entries are scoped by dialect and tenant (one tenant never learns from timing what another sent).

Admission on evidence of reuse: an item is kept only the second time its bytes are seen. The first
time leaves only a fingerprint (a hash, in a two-generation set of bounded size), so traffic that
never repeats pays a lookup per item and keeps nothing, and one-off transcripts never push the
items of a live agent session out. An agent loop re-sends its history every turn: an item is
decoded when it first comes, once more when it comes back (then kept), and never after.

The budget counts what entries really hold: the key's bytes and the decoded objects, measured
object by object when an entry is admitted (`deep_size`), plus the LRU's own cost per entry and
the fingerprints (calibrated with tracemalloc: tests/ingress/test_memo.py checks the accounting
against it), times what the allocator loses around them (calibrated against RSS by bench/memo.py).

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

from gateway.ingress.errors import check_depth

T = TypeVar("T")

# what an entry costs beyond its key's bytes and its decoded objects: the key and value tuples,
# the size, the OrderedDict's slot and links (measured at ~220 bytes with tracemalloc)
_OVERHEAD = 256
# what one fingerprint costs (an int object in a set, with the set's spare room)
_FINGERPRINT_BYTES = 112
# RSS over the bytes the objects hold: what an entry leaves unusable around it in the
# allocator's pools once entries come and go (measured with bench/memo.py: RSS growth was 1.26x
# to 1.40x the tracemalloc-measured size for agent and for short chat transcripts)
_RSS_FACTOR = 1.3
# a generation of fingerprints is this share of the budget; two generations are kept
_FINGERPRINT_SHARE = 16
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


class DecodeMemo:
    """The process's memo; `max_bytes` 0 turns it off (every item is decoded, as before).
    `admit_after`: how many sightings of an item's bytes admit it (2: on evidence of reuse; 1:
    at once).

    A least-recently-used map on an OrderedDict (its lookups and moves are C code: cachetools'
    LRUCache, pure Python, cost more per item than decoding saved on short messages)."""

    def __init__(self, max_bytes: int, *, admit_after: int = 2) -> None:
        if admit_after not in (1, 2):
            raise ValueError("admit_after is 1 or 2")
        self.max_bytes = max_bytes
        # (scope, bytes) -> (size, decoded)
        self._cache: OrderedDict[tuple[str, bytes], tuple[int, Any]] | None = (
            OrderedDict() if max_bytes > 0 else None
        )
        self._admit_after = admit_after
        # fingerprints of items seen once: the current generation and the one before
        self._seen: set[int] = set()
        self._seen_before: set[int] = set()
        self._generation = max(1, max_bytes // _FINGERPRINT_SHARE // _FINGERPRINT_BYTES)
        self._scopes: dict[str, str] = {}  # one string per scope, shared by its entries' keys
        self._entries_size = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else 0

    @property
    def size(self) -> int:
        """What the entries and fingerprints hold, as counted against `max_bytes`."""
        return self._entries_size + _FINGERPRINT_BYTES * (len(self._seen) + len(self._seen_before))

    def items(self, scope: str, values: list[Any], max_depth: int) -> Items[Any]:
        """The transcript items of one request (`values`: a list in a top-level field of the
        body): found ones carry their decoded value; new ones are depth-checked here against the
        body's `max_depth`, each at its place (the body 1, the list 2, an item 3)."""
        cache = self._cache
        get = cache.get if cache is not None else None
        touch = cache.move_to_end if cache is not None else None
        if cache is not None:
            scope = self._scopes.setdefault(scope, scope)
        raws: list[bytes | None] = []
        found: list[Any] = []
        hits = 0
        for value in values:
            raw: bytes | None = None
            decoded = None
            if cache is not None:
                try:
                    raw = orjson.dumps(value)
                except orjson.JSONEncodeError:  # nested past what orjson writes: never kept
                    raw = None
                else:
                    key = (scope, raw)
                    entry = get(key)  # type: ignore[misc]
                    if entry is not None:
                        touch(key)  # type: ignore[misc]
                        decoded = entry[1]
                    elif not self._reused(key):
                        raw = None  # seen for the first time: decoded, not kept
            if decoded is None:
                check_depth(value, max_depth, start=3)
            else:
                hits += 1
            raws.append(raw)
            found.append(decoded)
        self.hits += hits
        self.misses += len(values) - hits
        return Items(self, scope, raws, found)

    def _reused(self, key: tuple[str, bytes]) -> bool:
        """Whether `key` was seen before (it is admitted now); else remember it was seen."""
        if self._admit_after == 1:
            return True
        fingerprint = hash(key)
        if fingerprint in self._seen or fingerprint in self._seen_before:
            return True
        seen = self._seen
        seen.add(fingerprint)
        if len(seen) >= self._generation:  # the older generation goes: the bound holds
            self._seen_before, self._seen = seen, set()
            self._evict()
        return False

    def _keep(self, scope: str, raw: bytes, decoded: Any) -> None:
        cache = self._cache
        if cache is None:
            return
        # a copy of exactly its size: orjson's output holds up to ten times its length in memory
        key = (scope, bytes(memoryview(raw)))
        size = int((sys.getsizeof(key[1]) + deep_size(decoded) + _OVERHEAD) * _RSS_FACTOR)
        if size > self.max_bytes:
            return
        old = cache.pop(key, None)
        if old is not None:  # decoded twice in one request (the same bytes at two places)
            self._entries_size -= old[0]
        cache[key] = (size, decoded)
        self._entries_size += size
        self._evict()

    def _evict(self) -> None:
        cache = self._cache
        while cache and self.size > self.max_bytes:
            _, (evicted, _) = cache.popitem(last=False)
            self._entries_size -= evicted


class Items(Generic[T]):
    """One request's transcript items, as `DecodeMemo.items` found them."""

    __slots__ = ("_memo", "_scope", "_raws", "found")

    def __init__(self, memo: DecodeMemo, scope: str, raws: list[bytes | None], found: list[T | None]) -> None:
        self._memo = memo
        self._scope = scope
        self._raws = raws
        self.found = found  # per item: its decoded value, or None when it is new

    def decode(self, index: int, decode: Callable[[], T]) -> T:
        """Item `index` decoded: as found, or by `decode()` and then kept (a decode that raises
        keeps nothing: errors are reported with the item's place, which the memo does not know)."""
        value = self.found[index]
        if value is None:
            value = decode()
            raw = self._raws[index]
            if raw is not None:
                self._memo._keep(self._scope, raw, value)
        return value


def fresh_items(count: int) -> Items[Any]:
    """Items none of which is known, kept nowhere: decoding outside an exchange (tests, tools,
    count_tokens), whose body `parse_json_body` depth-checked whole."""
    return Items(_NOWHERE, "", [None] * count, [None] * count)


_NOWHERE = DecodeMemo(0)
