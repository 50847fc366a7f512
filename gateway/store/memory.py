"""In-process continuity store: a bounded TTL + LRU map (lost on restart, not shared)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from cachetools import TTLCache

from gateway.store.base import RecordTooLarge

__all__ = ["ENTRY_OVERHEAD_BYTES", "MemoryStore", "RecordTooLarge", "entry_size"]

# What one entry costs beyond its value's bytes: the key (at most ~200 characters: a session id
# is at most 128), the str and bytes object headers, the cache's dict slot and its TTL/LRU links
# (measured at ~270 bytes with a 62-character key). A value shared by several keys is counted once
# per key, so the bound holds with room to spare.
ENTRY_OVERHEAD_BYTES = 512


def entry_size(value: bytes) -> int:
    return len(value) + ENTRY_OVERHEAD_BYTES


class _Share(TTLCache[str, bytes]):
    """One tenant's entries; counts what the bounds evict into `evictions` (expired entries are
    not evictions: cachetools drops those without popitem)."""

    def __init__(self, evictions: list[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._evictions = evictions
        # cachetools' own dict of the entries: a key absent from it is a miss whatever the clock
        # says, found at C speed (a TTLCache miss costs ~0.8 us of Python; a transcript seen for
        # the first time looks up hundreds of keys that were never written). None: look up each.
        data = self.__dict__.get("_Cache__data")
        self.entries: dict[str, Any] | None = data if type(data) is dict else None

    def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """`get` of each key."""
        get, entries = self.get, self.entries
        if entries is None:
            return [get(key) for key in keys]
        return [get(key) if key in entries else None for key in keys]

    def popitem(self) -> tuple[str, bytes]:
        self._evictions[0] += 1
        return super().popitem()


class MemoryStore:
    """Keys expire `ttl_seconds` after they were written; beyond `max_bytes` (values plus a fixed
    per-entry overhead) or `max_entries`, entries are evicted, so memory stays bounded whatever the
    traffic and however long the answers.

    Each tenant's entries are a partition of their own: eviction takes the least recently used
    entries of the tenant holding the most (bytes, or entries for the entry bound), so a tenant
    filling the store evicts its own records, never another's smaller share; `tenant_max_bytes`
    caps one tenant's share outright."""

    backend = "memory"
    # its operations never suspend (no await): a time bound's timer cannot fire while one runs,
    # so FailOpenStore arms none (a timer made and cancelled, ~7 us, twice a turn with a call)
    waits = False

    def __init__(
        self,
        ttl_seconds: float,
        max_entries: int,
        max_bytes: int = 128 * 1024 * 1024,
        *,
        tenant_max_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_seconds <= 0 or max_entries <= 0 or max_bytes <= 0:
            raise ValueError("ttl_seconds, max_entries and max_bytes must be positive")
        if tenant_max_bytes is not None and tenant_max_bytes <= 0:
            raise ValueError("tenant_max_bytes must be positive")
        self._ttl = ttl_seconds
        self._clock = clock
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._tenant_max_bytes = min(max_bytes, tenant_max_bytes or max_bytes)
        self._tenants: dict[str, _Share] = {}
        self._evictions = [0]  # over the store's life, shared by the tenants' shares

    def __len__(self) -> int:
        return sum(len(cache) for cache in self._tenants.values())

    @property
    def size_bytes(self) -> int:
        """What the entries held now count against `max_bytes`."""
        return sum(int(cache.currsize) for cache in self._tenants.values())

    def tenant_bytes(self, tenant: str) -> int:
        cache = self._tenants.get(tenant)
        return int(cache.currsize) if cache is not None else 0

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        tenants = self._tenants
        if len(tenants) == 1:
            (cache,) = tenants.values()
            return cache.get_many(keys)
        # keys are scoped by tenant already: the partition holding a key is the only one that can
        values: list[bytes | None] = []
        for key in keys:
            found = None
            for cache in tenants.values():
                found = cache.get(key)
                if found is not None:
                    break
            values.append(found)
        return values

    async def put(self, keys: Sequence[str], value: bytes, *, tenant: str = "") -> int:
        # a copy of exactly the value's size: a caller reusing its buffer cannot change the entry, and
        # orjson's output (every record) holds up to ten times its length in allocated memory, which
        # kept for the TTL would make the byte bound a fraction of what the entries really use
        value = bytes(memoryview(value))
        if entry_size(value) > self._tenant_max_bytes:
            raise RecordTooLarge(f"a {len(value)}-byte record is larger than the store's max_bytes")
        cache = self._tenants.get(tenant)
        if cache is None:
            cache = self._tenants[tenant] = _Share(
                self._evictions,
                maxsize=self._tenant_max_bytes,
                ttl=self._ttl,
                timer=self._clock,
                getsizeof=entry_size,
            )
        before = self._evictions[0]
        for key in keys:
            cache[key] = value  # evicts this tenant's least recently used past its share
            self._bound()
        return self._evictions[0] - before

    def _bound(self) -> None:
        tenants = self._tenants
        entries = sum(len(c) for c in tenants.values())
        size = sum(int(c.currsize) for c in tenants.values())
        if entries <= self._max_entries and size <= self._max_bytes:
            return
        for cache in tenants.values():  # what is due anyway goes first
            cache.expire()
        while True:
            entries = sum(len(c) for c in tenants.values())
            size = sum(int(c.currsize) for c in tenants.values())
            if entries > self._max_entries:
                largest = max(tenants.values(), key=len)
            elif size > self._max_bytes:
                largest = max(tenants.values(), key=lambda c: c.currsize)
            else:
                break
            largest.popitem()  # its least recently used
        for tenant in [t for t, c in tenants.items() if not c]:
            del tenants[tenant]

    async def ping(self) -> bool:
        return True

    async def close(self) -> None:
        self._tenants.clear()
