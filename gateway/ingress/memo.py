"""Decode each transcript item once: what a dialect made of a message, kept under the exact bytes
the client sent for it.

An agent loop re-sends its whole history every turn, so without this the gateway would validate
and decode the same thousand messages on every request. Decoding an item is a pure function of
its bytes (the sealer's key is fixed for the process and no clock is read), so a decoded item
found under the same bytes is the one decoding would produce again: the transcript, and every
byte sent upstream, is identical with and without the memo (tests/ingress/test_memo.py proves it).
What is kept is immutable (the canonical model is frozen), so requests share it safely.

Entries are scoped by dialect and tenant (one tenant never learns from timing what another sent)
and bounded by the bytes of their keys in an LRU: the decoded value holds about as much again.

The memo also owns the JSON depth check of the items: `parse_json_body` skips the transcript
list and an item is walked only when it is new; an item found under its bytes had the same shape
when it was first checked.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson

from gateway.ingress.errors import check_depth

T = TypeVar("T")

# what an entry costs beyond its key: the tuple, the LRU's links, the decoded objects' headers
_OVERHEAD = 256


class DecodeMemo:
    """The process's memo; `max_bytes` 0 turns it off (every item is decoded, as before).

    A least-recently-used map on an OrderedDict (its lookups and moves are C code: cachetools'
    LRUCache, pure Python, cost more per item than decoding saved on short messages)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        # (scope, bytes) -> (size, decoded); size counts the key's bytes twice (the decoded value
        # holds about as much again)
        self._cache: OrderedDict[tuple[str, bytes], tuple[int, Any]] | None = (
            OrderedDict() if max_bytes > 0 else None
        )
        self.size = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else 0

    def items(self, scope: str, values: list[Any], max_depth: int) -> Items[Any]:
        """The transcript items of one request (`values`: a list in a top-level field of the
        body): found ones carry their decoded value; new ones are depth-checked here against the
        body's `max_depth`, each at its place (the body 1, the list 2, an item 3)."""
        cache = self._cache
        get = cache.get if cache is not None else None
        touch = cache.move_to_end if cache is not None else None
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
            if decoded is None:
                check_depth(value, max_depth, start=3)
            else:
                hits += 1
            raws.append(raw)
            found.append(decoded)
        self.hits += hits
        self.misses += len(values) - hits
        return Items(self, scope, raws, found)

    def _keep(self, scope: str, raw: bytes, decoded: Any) -> None:
        cache = self._cache
        size = 2 * (len(raw) + len(scope)) + _OVERHEAD
        if cache is None or size > self.max_bytes:
            return
        # a copy of exactly its size: orjson's output holds up to ten times its length in memory
        key = (scope, bytes(memoryview(raw)))
        old = cache.pop(key, None)
        if old is not None:  # decoded twice in one request (the same bytes at two places)
            self.size -= old[0]
        cache[key] = (size, decoded)
        self.size += size
        while self.size > self.max_bytes:
            _, (evicted, _) = cache.popitem(last=False)
            self.size -= evicted


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
