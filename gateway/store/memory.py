"""In-process continuity store: a bounded TTL + LRU map (lost on restart, not shared)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from cachetools import TTLCache

# What one entry costs beyond its value's bytes: the key (at most ~200 characters: a session id
# is at most 128), the str and bytes object headers, the cache's dict slot and its TTL/LRU links
# (measured at ~270 bytes with a 62-character key). A value shared by several keys is counted once
# per key, so the bound holds with room to spare.
ENTRY_OVERHEAD_BYTES = 512


def entry_size(value: bytes) -> int:
    return len(value) + ENTRY_OVERHEAD_BYTES


class RecordTooLarge(ValueError):
    """One record is larger than the whole store may hold: it is not kept (a counted put error)."""


class MemoryStore:
    """Keys expire `ttl_seconds` after they were written; beyond `max_bytes` (values plus a fixed
    per-entry overhead) or `max_entries`, the least recently used entries are evicted first, so
    memory stays bounded whatever the traffic and however long the answers."""

    backend = "memory"

    def __init__(
        self,
        ttl_seconds: float,
        max_entries: int,
        max_bytes: int = 128 * 1024 * 1024,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0 or max_entries <= 0 or max_bytes <= 0:
            raise ValueError("ttl_seconds, max_entries and max_bytes must be positive")
        self._max_entries = max_entries
        self._cache: TTLCache[str, bytes] = TTLCache(
            maxsize=max_bytes, ttl=ttl_seconds, timer=clock, getsizeof=entry_size
        )

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def size_bytes(self) -> int:
        """What the entries held now count against `max_bytes`."""
        return int(self._cache.currsize)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        cache = self._cache
        return [cache.get(key) for key in keys]

    async def put(self, keys: Sequence[str], value: bytes) -> None:
        # a copy of exactly the value's size: a caller reusing its buffer cannot change the entry, and
        # orjson's output (every record) holds up to ten times its length in allocated memory, which
        # kept for the TTL would make the byte bound a fraction of what the entries really use
        value = bytes(memoryview(value))
        cache = self._cache
        if entry_size(value) > cache.maxsize:
            raise RecordTooLarge(f"a {len(value)}-byte record is larger than the store's max_bytes")
        limit = self._max_entries
        for key in keys:
            cache[key] = value  # evicts least recently used entries past max_bytes
            while len(cache) > limit:
                cache.popitem()

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._cache.clear()
