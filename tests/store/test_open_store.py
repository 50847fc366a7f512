"""open_store: the configured backend behind the fail-open wrapper, with no I/O at startup."""

from __future__ import annotations

from pathlib import Path

from gateway.config import StoreConfig
from gateway.store import FailOpenStore, MemoryStore, RedisStore, SqliteStore, open_store
from tests.redis_server import RedisServer, free_port
from tests.store.conftest import op_log

Op = tuple[str, str, str]


async def round_trip(store: FailOpenStore) -> None:
    await store.put(["k1", "k2"], b"v")
    assert await store.get_many(["k2", "nope"]) == [b"v", None]
    assert await store.ping() is True


async def test_memory_is_the_default() -> None:
    seen: list[Op] = []
    store = open_store(StoreConfig(max_entries=2), on_op=op_log(seen))
    assert isinstance(store, FailOpenStore) and isinstance(store.inner, MemoryStore)
    assert store.backend == "memory"
    await round_trip(store)
    await store.put(["k3"], b"w")  # max_entries=2 from the config bounds it
    assert len(store.inner) == 2
    await store.close()
    assert seen[:4] == [
        ("memory", "put", "ok"),
        ("memory", "get", "hit"),
        ("memory", "get", "miss"),
        ("memory", "ping", "ok"),
    ]


async def test_sqlite_uses_the_configured_path(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "continuity.db"
    store = open_store(StoreConfig(backend="sqlite", path=str(path)))
    assert isinstance(store.inner, SqliteStore) and store.backend == "sqlite"
    assert not path.exists()  # opened on first use, not at startup
    await round_trip(store)
    await store.close()
    assert path.exists()


async def test_redis_uses_the_configured_url(redis_server: RedisServer) -> None:
    store = open_store(StoreConfig(backend="redis", url=redis_server.url))
    assert isinstance(store.inner, RedisStore) and store.backend == "redis"
    await round_trip(store)
    await store.close()


async def test_redis_down_at_startup_still_opens_and_serves_misses() -> None:
    seen: list[Op] = []
    config = StoreConfig(backend="redis", url=f"redis://127.0.0.1:{free_port()}/0")
    store = open_store(config, on_op=op_log(seen))
    assert await store.get_many(["k"]) == [None]
    await store.put(["k"], b"v")
    await store.close()
    assert seen == [
        ("redis", "get", "error"),
        ("redis", "put", "error"),
        ("redis", "retry", "queued"),
        ("redis", "retry", "dropped"),  # Redis never came back: lost at shutdown, and counted
    ]


async def test_only_the_remote_backend_backs_off(tmp_path: Path) -> None:
    # A dead Redis costs a connect timeout per call, so it is skipped for a while after a failure;
    # local backends fail fast and a transient SQLite lock should not cost later requests a miss.
    stores = {
        name: open_store(StoreConfig(backend=name, path=str(tmp_path / "c.db")))
        for name in ("memory", "sqlite", "redis")
    }
    assert {name: store.backoff_seconds > 0 for name, store in stores.items()} == {
        "memory": False,
        "sqlite": False,
        "redis": True,
    }
    for store in stores.values():
        await store.close()
