"""The continuity store contract: a small async key -> bytes map with a TTL.

The continuity layer decides the keys (tool-call ids, session + text hash) and the value format;
a backend only stores bytes. Backends raise on failure; `FailOpenStore` turns failures into misses,
counts them, and never lets a store outage fail a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class StoreBusy(Exception):
    """A write was not done because another connection holds the backend's write lock (or too
    many writes wait for it): the entry is skipped, counted as outcome `busy`."""


class StoreFault(Exception):
    """The backend refuses operations while a condition lasts that it logged once when it began
    (for example SQLite files that are unsafe to use): counted as an error, not logged again."""


class StoreUnavailable(Exception):
    """A lookup that must not fail open (continuing a kept answer by its id: a miss would tell the
    client the answer does not exist) could not be answered: the client gets a retryable 503."""


class StoreRefused(ValueError):
    """A write the backend will never take (for example one record larger than the whole store):
    counted as an error, and not retried."""


class RecordTooLarge(StoreRefused):
    """One record is larger than the store (or a tenant's share of it) may hold: it is not kept."""


class ContinuityStore(Protocol):
    backend: str  # "memory" | "sqlite" | "redis": the `backend` label of store metrics

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """Values for `keys`, in order; None for a miss or an expired entry."""
        ...

    async def put(self, keys: Sequence[str], value: bytes, *, tenant: str = "") -> int | None:
        """Store `value` under every key, each expiring after the configured TTL. `tenant`: whose
        record it is (the keys are already scoped by it); a backend that bounds its size bounds
        each tenant's share, so one tenant's traffic never evicts another's continuity. Returns
        how many records the bounds evicted to make room (counted as op `evict`)."""
        ...

    async def ping(self) -> bool:
        """True when the backend is reachable (readiness)."""
        ...

    async def close(self) -> None:
        """Flush and release the backend (called once at shutdown)."""
        ...
