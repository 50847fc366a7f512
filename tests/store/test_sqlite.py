"""SqliteStore specifics: durability across restarts, WAL, the one-table schema, purging, and
keeping sqlite3 off the event loop thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest

from gateway.store.failopen import FailOpenStore
from gateway.store.sqlite import SqliteStore
from tests.store.conftest import FakeClock, op_log


def raw_rows(path: Path) -> list[tuple[str, bytes, float]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT key, value, expires FROM continuity ORDER BY key").fetchall()


def wal_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


async def test_entries_survive_a_restart(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "state" / "continuity.db"
    first = SqliteStore(path, ttl_seconds=100, clock=clock)
    await first.put(["call_1", "call_2"], b"turn")
    await first.put(["short"], b"x")
    await first.close()

    clock.advance(50)
    second = SqliteStore(path, ttl_seconds=100, clock=clock)
    try:
        assert await second.get_many(["call_2", "call_1", "short"]) == [b"turn", b"turn", b"x"]
        clock.advance(51)  # expiry times are stored with the rows and still hold after the restart
        assert await second.get_many(["call_1"]) == [None]
    finally:
        await second.close()


async def test_wal_mode_and_the_schema(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "continuity.db"
    store = SqliteStore(path, ttl_seconds=100, clock=clock)
    await store.put(["k"], b"v")
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        columns = conn.execute("PRAGMA table_info(continuity)").fetchall()
    assert tables == [("continuity",), ("tenant_bytes",)]  # the second: each tenant's total
    assert [(name, kind, pk) for _, name, kind, _, _, pk in columns] == [
        ("key", "TEXT", 1),
        ("value", "BLOB", 0),
        ("expires", "REAL", 0),
        ("tenant", "TEXT", 0),
        ("size", "INTEGER", 0),
    ]
    assert raw_rows(path) == [("k", b"v", clock.now + 100)]
    await store.close()


async def test_close_checkpoints_the_wal_into_the_database(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "continuity.db"
    store = SqliteStore(path, ttl_seconds=100, clock=clock)
    await store.put([f"k{n}" for n in range(100)], b"v" * 1000)
    assert wal_bytes(path) > 0  # writes sit in the WAL while the store is open
    await store.close()
    assert wal_bytes(path) == 0
    assert len(raw_rows(path)) == 100


async def test_construction_does_no_io_and_creates_parent_dirs_on_first_use(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "not" / "yet" / "there.db"
    store = SqliteStore(path, ttl_seconds=100, clock=clock)
    assert not (tmp_path / "not").exists()
    assert await store.ping() is True
    assert path.exists()
    await store.close()


async def test_expired_rows_are_purged_on_a_later_put(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "continuity.db"
    store = SqliteStore(path, ttl_seconds=10, clock=clock)
    await store.put(["old1", "old2"], b"old")
    clock.advance(11)
    await store.put(["mid"], b"mid")  # within the purge interval: expired rows stay, but are invisible
    assert [row[0] for row in raw_rows(path)] == ["mid", "old1", "old2"]
    assert await store.get_many(["old1", "old2"]) == [None, None]
    clock.advance(120)
    await store.put(["new"], b"new")
    assert [row[0] for row in raw_rows(path)] == ["new"]  # "mid" expired too and went with them
    await store.close()


async def test_sqlite_runs_off_the_event_loop_thread(tmp_path: Path) -> None:
    threads: set[int] = set()

    def recording_clock() -> float:  # called from inside every sqlite job
        threads.add(threading.get_ident())
        return 1000.0

    store = SqliteStore(tmp_path / "c.db", ttl_seconds=10, clock=recording_clock)
    await store.put(["k"], b"v")
    await store.get_many(["k"])
    await store.close()
    # one thread reads and one writes (so a lookup never waits behind a write), neither is the loop's
    assert len(threads) == 2 and threading.get_ident() not in threads


async def test_a_closed_store_raises_and_fail_open_turns_that_into_misses(
    tmp_path: Path, clock: FakeClock
) -> None:
    store = SqliteStore(tmp_path / "c.db", ttl_seconds=10, clock=clock)
    await store.put(["k"], b"v")
    await store.close()
    with pytest.raises(RuntimeError):
        await store.get_many(["k"])
    seen: list[tuple[str, str, str]] = []
    wrapped = FailOpenStore(store, op_log(seen))
    assert await wrapped.get_many(["k"]) == [None]
    assert seen == [("sqlite", "get", "error")]


async def test_an_unusable_path_fails_open(tmp_path: Path, clock: FakeClock) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    seen: list[tuple[str, str, str]] = []
    store = FailOpenStore(SqliteStore(blocker / "c.db", ttl_seconds=10, clock=clock), op_log(seen))
    assert await store.ping() is False
    await store.put(["k"], b"v")
    assert await store.get_many(["j"]) == [None]
    await store.close()
    assert seen == [
        ("sqlite", "ping", "error"),
        ("sqlite", "put", "error"),
        ("sqlite", "retry", "queued"),
        ("sqlite", "get", "error"),
        ("sqlite", "retry", "dropped"),  # the path never became usable
    ]


async def test_a_lookup_right_after_a_put_sees_it_though_reads_and_writes_run_apart(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "c.db", ttl_seconds=10)
    try:
        for n in range(50):
            put = asyncio.ensure_future(store.put([f"k{n}"], f"v{n}".encode()))
            await asyncio.sleep(0)  # the put is issued (handed to the writer), not yet written
            assert await store.get_many([f"k{n}"]) == [f"v{n}".encode()]
            await put
            assert await store.get_many([f"k{n}"]) == [f"v{n}".encode()]
    finally:
        await store.close()
