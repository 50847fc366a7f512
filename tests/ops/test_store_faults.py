"""The gateway on a SQLite store that another process locks, or whose files are deleted: requests
keep being served, lookups do not wait for the lock, busy writes are counted, and readiness says
when the store lost its files."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from gateway.simulators.base import Reply
from tests.ops.conftest import USER, running_stack
from tests.store.test_sqlite_faults import release, write_lock_held_by_another_process


def sqlite_at(path: Path):
    def adjust(data):
        data["store"] = {"backend": "sqlite", "path": str(path)}

    return adjust


def store_ops(body: bytes, op: str, outcome: str) -> float:
    prefix = f'gateway_store_operations_total{{backend="sqlite",op="{op}",outcome="{outcome}"}} '
    for line in body.decode().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return 0.0


async def test_requests_are_served_and_busy_writes_counted_while_another_process_holds_the_lock(
    tmp_path: Path,
):
    path = tmp_path / "continuity.db"
    async with running_stack(sqlite_at(path)) as stack:
        assert (await stack.get("/readyz"))[0] == 200  # creates the file and its schema
        with write_lock_held_by_another_process(path) as locker:
            for _ in range(3):
                stack.hub.states["deepseek"].push(Reply(text="forty-two", reasoning="6*7"))
                status, _, body = await stack.chat({"model": "deepseek", "messages": USER})
                assert status == 200, body
                await stack.state.recorder.drain()
            assert (await stack.get("/readyz"))[0] == 200  # lookups work: still ready
            _, _, metrics = await stack.get("/metrics")
            assert store_ops(metrics, "put", "busy") == 3
            release(locker)


async def test_deleted_database_files_turn_readiness_503_and_the_store_reopens(tmp_path: Path):
    path = tmp_path / "continuity.db"
    async with running_stack(sqlite_at(path)) as stack:
        stack.hub.states["deepseek"].push(Reply(text="forty-two", reasoning="6*7"))
        assert (await stack.chat({"model": "deepseek", "messages": USER}))[0] == 200
        await stack.state.recorder.drain()
        assert (await stack.get("/readyz"))[0] == 200
        for suffix in ("", "-wal", "-shm"):
            os.unlink(f"{path}{suffix}")

        status, _, body = await stack.get("/readyz")
        assert status == 503 and orjson.loads(body)["store"] == "sqlite"
        for _ in range(100):  # the store reopens a new file in the background
            if (await stack.get("/readyz"))[0] == 200:
                break
        else:
            raise AssertionError("readiness did not recover")
        stack.hub.states["deepseek"].push(Reply(text="again", reasoning="r"))
        assert (await stack.chat({"model": "deepseek", "messages": USER}))[0] == 200
        await stack.state.recorder.drain()
        assert path.exists()
