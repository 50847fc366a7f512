"""In-process continuity store: a bounded TTL + LRU map (lost on restart, not shared)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from cachetools import TTLCache


class MemoryStore:
    """Keys expire `ttl_seconds` after they were written; beyond `max_entries` the least recently
    used entry is evicted first, so memory stays bounded whatever the traffic."""

    backend = "memory"

    def __init__(
        self, ttl_seconds: float, max_entries: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if ttl_seconds <= 0 or max_entries <= 0:
            raise ValueError("ttl_seconds and max_entries must be positive")
        self._cache: TTLCache[str, bytes] = TTLCache(maxsize=max_entries, ttl=ttl_seconds, timer=clock)

    def __len__(self) -> int:
        return len(self._cache)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        cache = self._cache
        return [cache.get(key) for key in keys]

    async def put(self, keys: Sequence[str], value: bytes) -> None:
        # bytes() copies a bytearray/memoryview so a caller reusing its buffer cannot change the entry.
        value = bytes(value)
        cache = self._cache
        for key in keys:
            cache[key] = value

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._cache.clear()
