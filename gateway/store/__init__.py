"""Continuity store backends: memory, sqlite, redis (see base.py for the contract).

`open_store` builds the configured backend wrapped in `FailOpenStore`, which is what the rest of the
gateway uses: it never raises, and reports every operation for the store metrics."""

from __future__ import annotations

from gateway.config import StoreConfig
from gateway.store.base import ContinuityStore
from gateway.store.failopen import FailOpenStore, OnOp
from gateway.store.memory import MemoryStore
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore

__all__ = [
    "ContinuityStore",
    "FailOpenStore",
    "MemoryStore",
    "OnOp",
    "RedisStore",
    "SqliteStore",
    "open_store",
]

# After a failure, how long to stop calling the backend. Only a remote backend needs it: its failures
# cost a connect/read timeout each, while a local one fails fast (and a transient SQLite lock should
# not cost the next requests their continuity).
BACKOFF_SECONDS = {"memory": 0.0, "sqlite": 0.0, "redis": 1.5}


def open_store(config: StoreConfig, on_op: OnOp | None = None) -> FailOpenStore:
    """The configured backend behind the fail-open wrapper. Does no I/O: SQLite opens its file and
    Redis connects on first use, so a missing Redis never stops the gateway from starting."""
    inner: ContinuityStore
    match config.backend:
        case "memory":
            inner = MemoryStore(
                config.ttl_seconds,
                config.max_entries,
                config.max_bytes,
                tenant_max_bytes=config.tenant_max_bytes,
            )
        case "sqlite":
            inner = SqliteStore(
                config.path,
                config.ttl_seconds,
                max_bytes=config.max_bytes,
                tenant_max_bytes=config.tenant_max_bytes,
            )
        case "redis":
            inner = RedisStore(config.url, config.ttl_seconds, tenant_max_bytes=config.tenant_max_bytes)
        case other:
            raise ValueError(f"unknown continuity store backend {other!r}")
    return FailOpenStore(inner, on_op, backoff_seconds=BACKOFF_SECONDS[config.backend])
