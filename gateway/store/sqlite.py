"""Durable single-host continuity store: one SQLite file in WAL mode, so entries survive a gateway
restart.

Two worker threads, each owning its own connection, keep sqlite3 off the event loop: one reads,
one writes. In WAL mode readers never wait for a writer, so a lookup never queues behind a write
stuck on a lock another process holds (another gateway process on the same file, a backup tool).

Bounded like the memory store: each tenant's rows within `tenant_max_bytes`, the file's within
`max_bytes` (values plus a fixed per-row overhead), the oldest evicted first (see `_BOUNDS`).

Faults it handles instead of suffering:
- Write lock held elsewhere: a write waits at most `busy_timeout_ms`, then fails as `StoreBusy`
  (counted `busy`), and writes back off (doubling, up to 8 s: the queued ones and new ones fail
  at once) while lookups go on. At most `max_pending_writes` wait in line; more fail as busy.
- Files deleted or replaced while open: checked before every operation (a stat per file). The
  writer reopens (a new, empty file), so later turns are durable again; readiness reports the loss
  (one failed ping). Without the check, writes would go on into the deleted inode and be lost at
  the next restart.
- A `-shm` file that is not writable (read-only, `chattr +i`): SQLite maps that file into memory
  and grows it as the WAL grows; growing an unwritable one ends the process with SIGBUS, which no
  code can catch. Writes are refused while it is unwritable (checked before each write), and
  readiness fails; no new connection is opened on it (an open read connection keeps serving
  lookups). What cannot be prevented: the file turning unwritable or being truncated by
  another program between the check and SQLite's next growth of the mapping (`gateway serve`
  enables faulthandler, so such a crash at least leaves a traceback on stderr).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import quote

from gateway.store.base import RecordTooLarge, StoreBusy, StoreFault
from gateway.store.memory import ENTRY_OVERHEAD_BYTES, entry_size

T = TypeVar("T")
log = logging.getLogger(__name__)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS continuity (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires REAL"
    " NOT NULL, tenant TEXT NOT NULL DEFAULT '', size INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS continuity_expires ON continuity (expires)",
)
# Each tenant's share (and the whole file) is bounded as the memory store bounds its own: a row
# counts its value plus ENTRY_OVERHEAD_BYTES, and beyond a bound the oldest rows go first (of the
# tenant over its share; past the total, of the tenant holding the most). The totals per tenant
# are kept by triggers in the file itself, so every process sharing it sees the same figures.
_BOUNDS = (
    "CREATE INDEX IF NOT EXISTS continuity_tenant ON continuity (tenant, expires)",
    "CREATE TABLE IF NOT EXISTS tenant_bytes (tenant TEXT PRIMARY KEY, bytes INTEGER NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS continuity_added AFTER INSERT ON continuity BEGIN"
    " INSERT OR IGNORE INTO tenant_bytes VALUES (NEW.tenant, 0);"
    " UPDATE tenant_bytes SET bytes = bytes + NEW.size WHERE tenant = NEW.tenant; END",
    "CREATE TRIGGER IF NOT EXISTS continuity_removed AFTER DELETE ON continuity BEGIN"
    " UPDATE tenant_bytes SET bytes = bytes - OLD.size WHERE tenant = OLD.tenant; END",
)
# rows looked at per step when the oldest are evicted
_EVICT_BATCH_ROWS = 256
# Below SQLite's historical 999 bound-parameter limit (one slot is the expiry cut-off).
_KEYS_PER_SELECT = 500
# Expired rows are invisible at once (every read filters on `expires`); deleting them is only
# housekeeping, done in small batches now and then so no single put waits on a large delete.
_PURGE_INTERVAL_SECONDS = 60.0
_PURGE_BATCH_ROWS = 1000
# How long a write waits for a lock another connection holds before it counts as busy. Another
# gateway process holds it for a few milliseconds per write; longer means something else has it.
_BUSY_TIMEOUT_MS = 100
# A reader waits only while a writer holds the exclusive lock to recover or reset the WAL.
_READ_BUSY_TIMEOUT_MS = 500
# a memory bound on writes waiting for the writer thread; busy writes fail fast, so the line
# only grows this long when the disk itself is slow
_MAX_PENDING_WRITES = 1024
_BACKOFF_FIRST_SECONDS = 0.25
_BACKOFF_MAX_SECONDS = 8.0

FileId = tuple[int, int] | None  # (device, inode); None: no such file


def _file_id(path: str) -> FileId:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _set_up(conn: sqlite3.Connection) -> None:
    """The schema, on a new file or one an earlier version wrote (no tenants, no sizes: its rows
    are counted as the default tenant's, by their length)."""
    for statement in _SCHEMA:
        conn.execute(statement)
    columns = {row[1] for row in conn.execute("PRAGMA table_info(continuity)")}
    if "size" not in columns:
        conn.execute("ALTER TABLE continuity ADD COLUMN tenant TEXT NOT NULL DEFAULT ''")
        conn.execute("ALTER TABLE continuity ADD COLUMN size INTEGER NOT NULL DEFAULT 0")
        conn.execute("UPDATE continuity SET size = length(value) + ?", (ENTRY_OVERHEAD_BYTES,))
    counted = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tenant_bytes'").fetchone()
    for statement in _BOUNDS:
        conn.execute(statement)
    if counted is None:
        conn.execute("INSERT INTO tenant_bytes SELECT tenant, SUM(size) FROM continuity GROUP BY tenant")


class SqliteStore:
    """Entries expire `ttl_seconds` after they were written. `clock` is wall-clock time (expiry
    times are stored in the file and must stay meaningful across restarts); `monotonic` times the
    write back-off. Tests inject both."""

    backend = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        ttl_seconds: float,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        busy_timeout_ms: int = _BUSY_TIMEOUT_MS,
        max_pending_writes: int = _MAX_PENDING_WRITES,
        max_bytes: int = 128 * 1024 * 1024,
        tenant_max_bytes: int | None = None,
    ) -> None:
        if ttl_seconds <= 0 or max_bytes <= 0:
            raise ValueError("ttl_seconds and max_bytes must be positive")
        if tenant_max_bytes is not None and tenant_max_bytes <= 0:
            raise ValueError("tenant_max_bytes must be positive")
        self._max_bytes = max_bytes
        self._tenant_max_bytes = min(max_bytes, tenant_max_bytes or max_bytes)
        self.evicted = 0  # rows evicted by the bounds (writer thread), over the store's life
        self.path = os.fspath(path)
        self._files = (self.path, self.path + "-wal", self.path + "-shm")
        self._ttl = float(ttl_seconds)
        self._clock = clock
        self._monotonic = monotonic
        self._busy_timeout_ms = busy_timeout_ms
        self._max_pending_writes = max_pending_writes
        # Files are opened lazily on the worker threads: constructing the store does no I/O.
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-sqlite-read")
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-sqlite-write")
        self._read_conn: sqlite3.Connection | None = None  # reader thread only
        self._read_db: FileId = None  # the .db file the read connection has open
        self._write_conn: sqlite3.Connection | None = None  # writer thread only
        # what the write connection opened: (db, wal, shm) ids; set on the writer thread, read by
        # the reader thread's readiness check (a tuple swap is atomic)
        self._write_files: tuple[FileId, FileId, FileId] | None = None
        self._lost = False  # the files vanished under the writer: the next ping reports it
        self._shm_unwritable = False
        self._next_purge = 0.0
        self._pending_writes = 0
        self._pending_lock = threading.Lock()
        self._retry_writes_at = 0.0
        self._backoff = 0.0
        # what was handed to the writer and is not written yet (event loop thread only): lookups
        # see it, as they did when one thread did both in order
        self._unwritten: dict[str, bytes] = {}
        self._closed = False

    async def _run(self, executor: ThreadPoolExecutor, fn: Callable[..., T], *args: object) -> T:
        if self._closed:
            raise RuntimeError("sqlite store is closed")
        return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)

    # --- writer thread only ---

    def _check_shm(self) -> None:
        shm = self._files[2]
        unwritable = os.path.exists(shm) and not os.access(shm, os.W_OK)
        if unwritable != self._shm_unwritable:
            self._shm_unwritable = unwritable
            if unwritable:
                log.error(
                    "continuity store %s is not writable (read-only or immutable): writes are off"
                    " until it is, since SQLite growing it would crash the process (SIGBUS)",
                    shm,
                )
            else:
                log.warning("continuity store %s is writable again: writes resume", shm)
        if unwritable:
            raise StoreFault(f"{shm} is not writable")

    def _write_connection(self) -> sqlite3.Connection:
        conn = self._write_conn
        if conn is not None:
            if tuple(map(_file_id, self._files)) == self._write_files:
                return conn
            log.error(
                "continuity store %s was deleted or replaced while open: reopening it (what was"
                " recorded before is gone; later turns are kept)",
                self.path,
            )
            self._lost = True
            self._drop_writer()
        return self._open_writer()

    def _open_writer(self) -> sqlite3.Connection:
        self._check_shm()
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        # isolation_level=None: autocommit; writes are grouped with explicit BEGIN/COMMIT.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"cannot enable WAL mode on {self.path} (got {mode})")
            # NORMAL is durable against a process crash in WAL mode; only an OS crash can lose the
            # last commits, which for a cache of continuity tokens costs at most a miss.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")  # another process may be setting up the same file
            try:
                _set_up(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        self._write_conn = conn
        self._write_files = tuple(map(_file_id, self._files))  # type: ignore[assignment]
        return conn

    def _drop_writer(self) -> None:
        conn, self._write_conn, self._write_files = self._write_conn, None, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def _reopen_if_lost(self) -> None:
        """Readiness found the files changed: reopen now rather than at the next write."""
        if self._write_conn is not None and tuple(map(_file_id, self._files)) != self._write_files:
            log.error("continuity store %s was deleted or replaced while open: reopening it", self.path)
            self._drop_writer()
        if self._write_conn is None:
            self._open_writer()

    def _put(self, keys: Sequence[str], value: bytes, tenant: str = "") -> int:
        # checked here too: writes queued before the first busy one fail at once instead of each
        # waiting out the busy timeout
        if self._monotonic() < self._retry_writes_at:
            raise StoreBusy(f"{self.path}: writes back off while another connection holds the lock")
        try:
            conn = self._write_connection()
            self._check_shm()
            now = self._clock()
            expires = now + self._ttl
            size = entry_size(value)
            conn.execute("BEGIN IMMEDIATE")
            try:
                # a key written again: its old row leaves its tenant's total first (the triggers)
                conn.executemany("DELETE FROM continuity WHERE key = ?", [(key,) for key in keys])
                conn.executemany(
                    "INSERT INTO continuity (key, value, expires, tenant, size) VALUES (?, ?, ?, ?, ?)",
                    [(key, value, expires, tenant, size) for key in keys],
                )
                if now >= self._next_purge:
                    self._purge(conn, now)
                evicted = self._bound(conn, tenant, now)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            if not self._backoff:
                log.warning("continuity store %s: write lock held elsewhere; writes back off", self.path)
            self._backoff = min(_BACKOFF_MAX_SECONDS, self._backoff * 2 or _BACKOFF_FIRST_SECONDS)
            self._retry_writes_at = self._monotonic() + self._backoff
            raise StoreBusy(f"{self.path}: another connection holds the write lock") from None
        if self._backoff:
            log.warning("continuity store %s: writes go through again", self.path)
            self._backoff = 0.0
        return evicted

    def _purge(self, conn: sqlite3.Connection, now: float) -> None:
        deleted = conn.execute(
            "DELETE FROM continuity WHERE rowid IN (SELECT rowid FROM continuity WHERE expires <= ? LIMIT ?)",
            (now, _PURGE_BATCH_ROWS),
        ).rowcount
        # A full batch means more is waiting: purge again on the next put instead of after the interval.
        self._next_purge = now if deleted >= _PURGE_BATCH_ROWS else now + _PURGE_INTERVAL_SECONDS

    def _bound(self, conn: sqlite3.Connection, tenant: str, now: float) -> int:
        """The writing tenant within its share, then the file within `max_bytes`: expired rows
        go first, then the oldest of the tenant over its share (or holding the most). How many
        live rows were evicted."""
        evicted = 0
        share = self._tenant_bytes(conn, tenant)
        if share > self._tenant_max_bytes:
            conn.execute("DELETE FROM continuity WHERE tenant = ? AND expires <= ?", (tenant, now))
            evicted += self._evict(conn, tenant, self._tenant_bytes(conn, tenant) - self._tenant_max_bytes)
        while True:
            row = conn.execute(
                "SELECT SUM(bytes), (SELECT tenant FROM tenant_bytes ORDER BY bytes DESC LIMIT 1)"
                " FROM tenant_bytes"
            ).fetchone()
            total, largest = (row[0] or 0), row[1]
            if total <= self._max_bytes or largest is None:
                return evicted
            if conn.execute("DELETE FROM continuity WHERE expires <= ?", (now,)).rowcount:
                continue
            more = self._evict(conn, largest, total - self._max_bytes)
            if not more:
                return evicted
            evicted += more

    @staticmethod
    def _tenant_bytes(conn: sqlite3.Connection, tenant: str) -> int:
        row = conn.execute("SELECT bytes FROM tenant_bytes WHERE tenant = ?", (tenant,)).fetchone()
        return row[0] if row is not None else 0

    def _evict(self, conn: sqlite3.Connection, tenant: str, over: int) -> int:
        """The tenant's oldest rows, until `over` bytes are gone; how many went."""
        evicted = 0
        while over > 0:
            rows = conn.execute(
                "SELECT rowid, size FROM continuity WHERE tenant = ? ORDER BY expires, rowid LIMIT ?",
                (tenant, _EVICT_BATCH_ROWS),
            ).fetchall()
            if not rows:
                break
            doomed = []
            for rowid, size in rows:
                doomed.append(rowid)
                over -= size
                if over <= 0:
                    break
            conn.execute(f"DELETE FROM continuity WHERE rowid IN ({','.join('?' * len(doomed))})", doomed)
            evicted += len(doomed)
        self.evicted += evicted
        return evicted

    def _close_writer(self) -> None:
        if self._write_conn is None:
            return
        try:
            if not self._shm_unwritable and tuple(map(_file_id, self._files)) == self._write_files:
                # Fold the WAL back into the main file so a copy of the .db alone is complete.
                self._write_conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._drop_writer()

    # --- reader thread only ---

    def _read_connection(self) -> sqlite3.Connection | None:
        """The read connection, reopened when the file was replaced; None while there is no file
        (nothing was ever written: every key is a miss)."""
        current = _file_id(self.path)
        if self._read_conn is not None and current == self._read_db:
            return self._read_conn
        if self._read_conn is not None:
            self._read_conn.close()
            self._read_conn = None
        if current is None:
            return None
        shm = self._files[2]
        if os.path.exists(shm) and not os.access(shm, os.W_OK):
            # a connection opened now would map it read-only next to the writer's read-write
            # mapping of the same file, and SIGBUS on its first read
            raise StoreFault(f"{shm} is not writable")
        # mode=rw: a reader never creates the file (the writer does, with the schema)
        uri = "file:" + quote(os.path.abspath(self.path)) + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {_READ_BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA query_only = 1")
        self._read_conn, self._read_db = conn, current
        return conn

    def _get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        conn = self._read_connection()
        if conn is None:
            return [None] * len(keys)
        now = self._clock()
        unique = list(dict.fromkeys(keys))
        found: dict[str, bytes] = {}
        try:
            for start in range(0, len(unique), _KEYS_PER_SELECT):
                chunk = unique[start : start + _KEYS_PER_SELECT]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT key, value FROM continuity WHERE key IN ({marks}) AND expires > ?",
                    (*chunk, now),
                )
                found.update(rows)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):  # a file the writer has not set up yet: misses
                raise
        return [found.get(key) for key in keys]

    def _ping(self) -> bool:
        if self._lost:
            self._lost = False
            return False
        files = tuple(map(_file_id, self._files))
        shm = self._files[2]
        if files != self._write_files or (files[2] is not None and not os.access(shm, os.W_OK)):
            self._writer.submit(self._reopen_if_lost)  # a fresh file for the next writes
            return False
        conn = self._read_connection()
        return conn is not None and conn.execute("SELECT 1").fetchone() == (1,)

    def _close_reader(self) -> None:
        if self._read_conn is not None:
            self._read_conn.close()
            self._read_conn = None

    # --- the ContinuityStore protocol ---

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        unwritten = self._unwritten
        if not unwritten:
            return await self._run(self._reader, self._get_many, list(keys))
        values = [unwritten.get(key) for key in keys]
        rest = [key for key, value in zip(keys, values, strict=True) if value is None]
        if rest:
            found = dict(zip(rest, await self._run(self._reader, self._get_many, rest), strict=True))
            values = [
                found.get(key) if value is None else value for key, value in zip(keys, values, strict=True)
            ]
        return values

    async def put(self, keys: Sequence[str], value: bytes, *, tenant: str = "") -> int:
        if not keys:
            return 0
        now = self._monotonic()
        if now < self._retry_writes_at:
            raise StoreBusy(f"{self.path}: writes back off while another connection holds the lock")
        if self._closed:
            raise RuntimeError("sqlite store is closed")
        with self._pending_lock:
            if self._pending_writes >= self._max_pending_writes:
                raise StoreBusy(f"{self.path}: {self._pending_writes} writes are waiting already")
            self._pending_writes += 1
        keys, value = list(keys), bytes(value)
        if entry_size(value) > self._tenant_max_bytes:
            raise RecordTooLarge(f"a {len(value)}-byte record is larger than a tenant's share of the store")
        job = self._writer.submit(self._put, keys, value, tenant)
        for key in keys:
            self._unwritten[key] = value
        loop = asyncio.get_running_loop()

        def done(_job: object) -> None:
            # once the job ran, failed, or was cancelled before it started (a caller's timeout
            # cancels a queued job): the slot is free, and lookups read the file again
            with self._pending_lock:
                self._pending_writes -= 1
            try:
                loop.call_soon_threadsafe(self._written, keys, value)
            except RuntimeError:  # the loop is closed: nobody reads any more
                pass

        job.add_done_callback(done)
        return await asyncio.wrap_future(job)

    def _written(self, keys: list[str], value: bytes) -> None:
        unwritten = self._unwritten
        for key in keys:
            if unwritten.get(key) is value:  # not overwritten by a later put meanwhile
                del unwritten[key]

    async def ping(self) -> bool:
        if self._write_files is None:  # first use: create the file (and its schema)
            await self._run(self._writer, self._reopen_if_lost)
        return await self._run(self._reader, self._ping)

    async def close(self) -> None:
        if self._closed:
            return
        try:
            await self._run(self._writer, self._close_writer)
            await self._run(self._reader, self._close_reader)
        finally:
            self._closed = True
            # The closes above were the last jobs: the worker threads exit as soon as they return.
            self._writer.shutdown(wait=False)
            self._reader.shutdown(wait=False)
