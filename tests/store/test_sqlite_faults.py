"""SqliteStore under faults from outside the process: another process holding the write lock, the
database files deleted while open, an unwritable `-shm` file. Each test uses a real second process
or the real files; none measures time."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gateway.store.failopen import FailOpenStore
from gateway.store.sqlite import SqliteStore
from tests.store.conftest import FakeClock, op_log

# Holds the write lock (BEGIN IMMEDIATE, a row inserted) until it reads a line from stdin.
LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA busy_timeout = 10000")
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT OR REPLACE INTO continuity (key, value, expires) VALUES ('from-locker', x'01', 1e18)")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
"""


@contextmanager
def write_lock_held_by_another_process(path: Path) -> Iterator[subprocess.Popen[str]]:
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        yield locker
    finally:
        if locker.poll() is None:
            release(locker)


def release(locker: subprocess.Popen[str]) -> None:
    assert locker.stdin is not None
    locker.stdin.write("\n")
    locker.stdin.flush()
    assert locker.wait(timeout=30) == 0


async def test_reads_do_not_wait_behind_a_write_blocked_on_another_process(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    # a write that waits as long as it takes: only the release below lets it finish
    store = SqliteStore(path, ttl_seconds=100, busy_timeout_ms=60_000)
    await store.put(["k1"], b"v1")
    try:
        with write_lock_held_by_another_process(path) as locker:
            blocked_put = asyncio.create_task(store.put(["k2"], b"v2"))
            await asyncio.sleep(0)  # the put is handed to the writer thread
            # while that write waits for the lock, lookups are answered: from the file, and the
            # value still waiting to be written from memory
            assert await asyncio.wait_for(store.get_many(["k1", "k2"]), 30) == [b"v1", b"v2"]
            assert await asyncio.wait_for(store.ping(), 30) is True
            assert not blocked_put.done()
            release(locker)
            await asyncio.wait_for(blocked_put, 30)
        assert await store.get_many(["k2", "from-locker"]) == [b"v2", b"\x01"]
    finally:
        await store.close()


async def test_busy_writes_fail_open_counted_and_back_off_while_reads_go_on(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    monotonic = FakeClock()
    inner = SqliteStore(path, ttl_seconds=100, busy_timeout_ms=20, monotonic=monotonic)
    seen: list[tuple[str, str, str]] = []
    store = FailOpenStore(inner, op_log(seen))
    tried: list[list[str]] = []
    real_put = inner._put

    def counting_put(keys, value, tenant=""):  # what reached SQLite (on the writer thread)
        tried.append(list(keys))
        return real_put(keys, value, tenant)

    inner._put = counting_put  # type: ignore[method-assign]
    await store.put(["k1"], b"v1")
    try:
        with write_lock_held_by_another_process(path) as locker:
            await store.put(["k2"], b"v2")  # waits its 20 ms, then gives up: busy
            await store.put(["k3"], b"v3")  # backing off: not even tried
            await asyncio.gather(*(store.put([f"q{n}"], b"q") for n in range(20)))
            assert await store.get_many(["k1"]) == [b"v1"]  # lookups go on
            assert await store.ping() is True  # and the store stays ready
            release(locker)
        monotonic.advance(0.3)  # the first back-off is 0.25 s
        await store.put(["k4"], b"v4")
    finally:
        await store.close()
    puts = [outcome for _, op, outcome in seen if op == "put"]
    assert puts == ["ok", "busy", "busy", *["busy"] * 20, "ok"]
    assert tried[:2] == [["k1"], ["k2"]] and ["k4"] in tried  # k3 was not even tried then
    # the busy writes waited in the retry queue and were written once the lock was free
    assert ("sqlite", "retry", "dropped") not in seen
    reopened = SqliteStore(path, ttl_seconds=100, monotonic=monotonic)
    try:
        keys = ["k1", "k2", "k3", "k4", *(f"q{n}" for n in range(20))]
        assert None not in await reopened.get_many(keys)
    finally:
        await reopened.close()


async def test_deleted_database_files_are_detected_reported_and_reopened(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = SqliteStore(path, ttl_seconds=100)
    await store.put(["before"], b"1")
    assert await store.ping() is True
    for suffix in ("", "-wal", "-shm"):
        os.unlink(f"{path}{suffix}")

    assert await store.ping() is False  # readiness reports the loss...
    for _ in range(100):  # ...while the writer reopens a new file in the background
        if await store.ping():
            break
        await asyncio.sleep(0.01)
    else:
        pytest.fail("the store did not reopen its database file")
    await store.put(["after"], b"2")
    assert await store.get_many(["before", "after"]) == [None, b"2"]
    await store.close()

    restarted = SqliteStore(path, ttl_seconds=100)  # what was written after the loss is durable
    try:
        assert await restarted.get_many(["after"]) == [b"2"]
    finally:
        await restarted.close()


async def test_a_deletion_noticed_by_a_write_still_keeps_that_write(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = SqliteStore(path, ttl_seconds=100)
    await store.put(["before"], b"1")
    for suffix in ("", "-wal", "-shm"):
        os.unlink(f"{path}{suffix}")
    await store.put(["after"], b"2")
    assert await store.ping() is False  # the loss is reported once
    assert await store.ping() is True
    await store.close()
    restarted = SqliteStore(path, ttl_seconds=100)
    try:
        assert await restarted.get_many(["before", "after"]) == [None, b"2"]
    finally:
        await restarted.close()


def _chattr(flag: str, path: str) -> bool:
    try:
        return subprocess.run(["chattr", flag, path], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[list[str]]:
    """Files made immutable by the test (chattr +i: root on a filesystem with the attribute, as
    here); always made mutable again."""
    made: list[str] = []
    probe = tmp_path / "probe"
    probe.write_bytes(b"")
    if not _chattr("+i", str(probe)):
        pytest.skip("chattr +i is not available here (needs root and ext4/xfs/btrfs)")
    _chattr("-i", str(probe))
    yield made
    for path in made:
        _chattr("-i", path)


# Run in a child process: without the check the growth of the -shm mapping is a SIGBUS, which
# would take the test runner down with it.
SHM_SCENARIO = """
import asyncio, json, subprocess, sys
from gateway.store.failopen import FailOpenStore
from gateway.store.sqlite import SqliteStore

async def main(path):
    seen = []

    def on_op(_, op, outcome, times=1):  # a batch is reported once, with its count
        seen.extend([(op, outcome)] * times)

    store = FailOpenStore(SqliteStore(path, ttl_seconds=100), on_op)
    await store.put(["k0"], b"v0")
    out = {"first": await store.get_many(["k0"]) == [b"v0"]}  # a serving gateway reads too
    assert subprocess.run(["chattr", "+i", path + "-shm"]).returncode == 0
    try:
        # enough WAL frames to make SQLite grow the -shm mapping
        for n in range(40):
            await store.put([f"k{n}-{i}" for i in range(200)], b"x" * 4000)
        out["reads_during"] = await store.get_many(["k0"]) == [b"v0"]
        out["ready_during"] = await store.ping()
    finally:
        subprocess.run(["chattr", "-i", path + "-shm"])
    await store.put(["k-after"], b"ok")
    out["after"] = await store.get_many(["k-after"]) == [b"ok"]
    await store.close()
    out["seen"] = seen
    print(json.dumps(out))

asyncio.run(main(sys.argv[1]))
"""


def test_an_unwritable_shm_file_turns_writes_off_instead_of_crashing(
    tmp_path: Path, immutable: list[str]
) -> None:
    path = tmp_path / "c.db"
    immutable.append(f"{path}-shm")  # made mutable again even if the child dies
    child = subprocess.run(
        [sys.executable, "-c", SHM_SCENARIO, str(path)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"
    out = json.loads(child.stdout)
    assert out["first"] and out["reads_during"] and out["after"]
    assert out["ready_during"] is False
    puts = [outcome for op, outcome in out["seen"] if op == "put"]
    assert puts == ["ok", *["error"] * 40, "ok"]
    assert "is not writable" in child.stderr  # said once, when it began
    assert child.stderr.count("is not writable") == 1


async def test_a_store_opened_on_an_unwritable_shm_file_refuses_it_and_fails_open(
    tmp_path: Path, immutable: list[str], clock: FakeClock
) -> None:
    path = tmp_path / "c.db"
    first = SqliteStore(path, ttl_seconds=100, clock=clock)
    await first.put(["k"], b"v")
    await first.close()
    shm = f"{path}-shm"
    os.close(os.open(shm, os.O_CREAT | os.O_WRONLY))  # an empty one, as a crashed process leaves it
    assert _chattr("+i", shm)
    immutable.append(shm)
    seen: list[tuple[str, str, str]] = []
    store = FailOpenStore(SqliteStore(path, ttl_seconds=100, clock=clock), op_log(seen))
    try:
        assert await store.ping() is False
        await store.put(["k2"], b"v2")
        assert await store.get_many(["k"]) == [None]
        assert seen == [
            ("sqlite", "ping", "error"),
            ("sqlite", "put", "error"),
            ("sqlite", "retry", "queued"),
            ("sqlite", "get", "error"),
        ]
    finally:
        await store.close()
    assert seen[-1] == ("sqlite", "retry", "dropped")  # still unwritable at shutdown
    _chattr("-i", shm)
    reopened = SqliteStore(path, ttl_seconds=100, clock=clock)
    try:
        assert await reopened.get_many(["k"]) == [b"v"]
    finally:
        await reopened.close()
