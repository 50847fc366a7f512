"""Durable single-host continuity store: one SQLite file in WAL mode, so entries survive a gateway
restart. All sqlite3 calls run on one dedicated worker thread that owns the only connection: the
event loop never blocks on disk, and the connection is never shared between threads."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS continuity"
    " (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS continuity_expires ON continuity (expires)",
)
# Below SQLite's historical 999 bound-parameter limit (one slot is the expiry cut-off).
_KEYS_PER_SELECT = 500
# Expired rows are invisible at once (every read filters on `expires`); deleting them is only
# housekeeping, done in small batches now and then so no single put waits on a large delete.
_PURGE_INTERVAL_SECONDS = 60.0
_PURGE_BATCH_ROWS = 1000
# Another gateway process on the same file may hold the write lock briefly.
_BUSY_TIMEOUT_MS = 500


class SqliteStore:
    """Entries expire `ttl_seconds` after they were written. `clock` is wall-clock time (expiry
    times are stored in the file and must stay meaningful across restarts); tests inject one."""

    backend = "sqlite"

    def __init__(
        self, path: str | os.PathLike[str], ttl_seconds: float, *, clock: Callable[[], float] = time.time
    ) -> None:
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        self.path = os.fspath(path)
        self._ttl = float(ttl_seconds)
        self._clock = clock
        # The file is opened lazily on the worker thread: constructing the store does no I/O.
        self._conn: sqlite3.Connection | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-sqlite-store")
        self._next_purge = 0.0
        self._closed = False

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        if self._closed:
            raise RuntimeError("sqlite store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # --- worker thread only below (the single worker serializes every call) ---

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            parent = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(parent, exist_ok=True)
            # isolation_level=None: autocommit; writes are grouped with explicit BEGIN/COMMIT.
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise sqlite3.OperationalError(f"cannot enable WAL mode on {self.path} (got {mode})")
                # NORMAL is durable against a process crash in WAL mode; only an OS crash can lose the
                # last commits, which for a cache of continuity tokens costs at most a miss.
                conn.execute("PRAGMA synchronous = NORMAL")
                for statement in _SCHEMA:
                    conn.execute(statement)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        conn = self._connection()
        now = self._clock()
        unique = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        for start in range(0, len(unique), _KEYS_PER_SELECT):
            chunk = unique[start : start + _KEYS_PER_SELECT]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT key, value FROM continuity WHERE key IN ({marks}) AND expires > ?", (*chunk, now)
            )
            found.update(rows)
        return [found.get(key) for key in keys]

    def _put(self, keys: Sequence[str], value: bytes) -> None:
        conn = self._connection()
        now = self._clock()
        expires = now + self._ttl
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT OR REPLACE INTO continuity (key, value, expires) VALUES (?, ?, ?)",
                [(key, value, expires) for key in keys],
            )
            if now >= self._next_purge:
                self._purge(conn, now)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _purge(self, conn: sqlite3.Connection, now: float) -> None:
        deleted = conn.execute(
            "DELETE FROM continuity WHERE rowid IN (SELECT rowid FROM continuity WHERE expires <= ? LIMIT ?)",
            (now, _PURGE_BATCH_ROWS),
        ).rowcount
        # A full batch means more is waiting: purge again on the next put instead of after the interval.
        self._next_purge = now if deleted >= _PURGE_BATCH_ROWS else now + _PURGE_INTERVAL_SECONDS

    def _ping(self) -> bool:
        self._connection().execute("SELECT 1").fetchone()
        return True

    def _close(self) -> None:
        if self._conn is None:
            return
        try:
            # Fold the WAL back into the main file so a copy of the .db alone is complete.
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._conn.close()
            self._conn = None

    # --- the ContinuityStore protocol ---

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        return await self._run(self._get_many, list(keys))

    async def put(self, keys: Sequence[str], value: bytes) -> None:
        if not keys:
            return
        await self._run(self._put, list(keys), bytes(value))

    async def ping(self) -> bool:
        return await self._run(self._ping)

    async def close(self) -> None:
        if self._closed:
            return
        try:
            await self._run(self._close)
        finally:
            self._closed = True
            # The close above was the last job: the worker thread exits as soon as it returns.
            self._executor.shutdown(wait=False)
