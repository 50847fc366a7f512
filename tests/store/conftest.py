"""Store test fixtures: a real redis-server per test, and every backend behind one interface so the
contract suite runs unchanged against memory, sqlite and redis."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gateway.store.base import ContinuityStore
from gateway.store.memory import MemoryStore
from gateway.store.redis import RedisStore
from gateway.store.sqlite import SqliteStore
from tests.redis_server import redis_server

__all__ = ["redis_server"]  # re-exported: pytest finds fixtures by name in conftest.py


class FakeClock:
    """A clock tests move by hand, so TTL behaviour is checked without waiting."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@dataclass
class Backend:
    """How to build one kind of store, and how to let time pass for it."""

    name: str
    build: Callable[[float], ContinuityStore]  # ttl_seconds -> a new store
    pass_time: Callable[[float], Awaitable[None]]
    opened: list[ContinuityStore] = field(default_factory=list)

    def make(self, ttl_seconds: float = 3600.0) -> ContinuityStore:
        store = self.build(ttl_seconds)
        self.opened.append(store)
        return store


def _fake_time(clock: FakeClock) -> Callable[[float], Awaitable[None]]:
    async def pass_time(seconds: float) -> None:
        clock.advance(seconds)

    return pass_time


def make_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Backend:
    match name:
        case "memory":
            return Backend(name, lambda ttl: MemoryStore(ttl, 10_000, clock=clock), _fake_time(clock))
        case "sqlite":
            # Parent dirs that do not exist yet: the store creates them.
            numbers = itertools.count()
            return Backend(
                name,
                lambda ttl: SqliteStore(tmp_path / "a" / "b" / f"store-{next(numbers)}.db", ttl, clock=clock),
                _fake_time(clock),
            )
        case "redis":
            # Redis keeps time itself: its TTL tests really wait (about a second). The contract is
            # about what the store keeps; its fail-fast timeouts (tests/store/test_redis.py) would
            # turn a busy CI machine's scheduling delays into failures of 200 concurrent operations
            url = request.getfixturevalue("redis_server").url
            return Backend(
                name,
                # with a tenant bound: the server-side script every configured gateway uses
                lambda ttl: RedisStore(
                    url, ttl, connect_timeout=5.0, op_timeout=5.0, tenant_max_bytes=1 << 30
                ),
                asyncio.sleep,
            )
    raise ValueError(name)


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> AsyncIterator[Backend]:
    made = make_backend(request.param, request, tmp_path, clock)
    yield made
    for store in made.opened:
        await store.close()


@pytest.fixture(params=["memory", "sqlite"])
async def clocked_backend(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[Backend]:
    """The backends whose clock tests control (exact TTL boundaries)."""
    made = make_backend(request.param, request, tmp_path, clock)
    yield made
    for store in made.opened:
        await store.close()


def op_log(seen: list[tuple[str, str, str]]) -> Callable[..., None]:
    """A store's `on_op` callback listing one (backend, op, outcome) per operation: a batch is
    reported once, with its count (gateway/store/failopen.py)."""

    def on_op(backend: str, op: str, outcome: str, times: int = 1) -> None:
        seen.extend([(backend, op, outcome)] * times)

    return on_op
