"""FailOpenStore: failures become misses / no-ops, every outcome is reported, a failing backend is
backed off, and cancellation still propagates. Driven by a scripted backend and a fake clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from gateway.store.failopen import FailOpenStore
from tests.store.conftest import FakeClock, op_log

Op = tuple[str, str, str]


class ScriptedStore:
    """A backend whose next failure the test chooses: raise `error`, or hang until cancelled."""

    backend = "scripted"

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.calls: list[str] = []
        self.error: Exception | None = None
        self.hang = False
        self.ping_result = True
        self.short_reply = False
        self.called = asyncio.Event()
        self.reply: asyncio.Future[None] | None = None  # set: each call answers when it is done

    async def _misbehave(self, op: str) -> None:
        self.calls.append(op)
        self.called.set()
        if self.reply is not None:
            await self.reply
        if self.hang:
            await asyncio.Event().wait()
        if self.error is not None:
            raise self.error

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        await self._misbehave("get")
        values = [self.data.get(key) for key in keys]
        return values[:-1] if self.short_reply else values

    async def put(self, keys: Sequence[str], value: bytes, *, tenant: str = "") -> None:
        await self._misbehave("put")
        self.data.update(dict.fromkeys(keys, value))

    async def ping(self) -> bool:
        await self._misbehave("ping")
        return self.ping_result

    async def close(self) -> None:
        await self._misbehave("close")


@pytest.fixture
def inner() -> ScriptedStore:
    return ScriptedStore()


@pytest.fixture
def seen() -> list[Op]:
    return []


def wrap(inner: ScriptedStore, seen: list[Op], clock: FakeClock, **options: float) -> FailOpenStore:
    return FailOpenStore(inner, op_log(seen), clock=clock, **options)


async def test_reports_one_outcome_per_key_and_per_put(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    assert store.backend == "scripted"
    await store.put(["a", "b"], b"v")
    assert await store.get_many(["a", "x", "b"]) == [b"v", None, b"v"]
    assert await store.ping() is True
    assert seen == [
        ("scripted", "put", "ok"),
        ("scripted", "get", "hit"),
        ("scripted", "get", "hit"),
        ("scripted", "get", "miss"),
        ("scripted", "ping", "ok"),
    ]


async def test_empty_requests_do_not_reach_the_backend(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    assert await store.get_many([]) == []
    await store.put([], b"v")
    assert inner.calls == [] and seen == []


async def test_errors_become_misses_and_no_ops(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.error = ConnectionError("refused")
    assert await store.get_many(["a", "b"]) == [None, None]
    await store.put(["a"], b"v")
    assert await store.ping() is False
    assert inner.data == {}
    assert seen == [
        ("scripted", "get", "error"),
        ("scripted", "get", "error"),
        ("scripted", "put", "error"),
        ("scripted", "retry", "queued"),  # the failed write waits for the backend's return
        ("scripted", "ping", "error"),
    ]


async def test_backend_timeouts_are_reported_as_timeouts(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.error = TimeoutError("read timed out")
    assert await store.get_many(["a"]) == [None]
    await store.put(["a"], b"v")
    assert seen == [
        ("scripted", "get", "timeout"),
        ("scripted", "put", "timeout"),
        ("scripted", "retry", "queued"),
    ]


async def test_a_hanging_backend_is_cut_off_by_the_op_timeout(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock, op_timeout_seconds=0.05, close_timeout_seconds=0.05)
    inner.hang = True
    assert await store.get_many(["a"]) == [None]
    await store.put(["a"], b"v")
    assert await store.ping() is False
    await store.close()
    assert seen == [
        ("scripted", "get", "timeout"),
        ("scripted", "put", "timeout"),
        ("scripted", "retry", "queued"),
        ("scripted", "ping", "timeout"),
        ("scripted", "retry", "dropped"),  # still queued at shutdown (its last try timed out)
    ]
    assert inner.calls == ["get", "put", "ping", "put"]


def stall(loop: asyncio.AbstractEventLoop, after: float, seconds: float) -> None:
    """This process stops running the loop for `seconds` (a long garbage collection, the process
    descheduled on a loaded machine), starting `after` seconds from now."""
    loop.call_later(after, time.sleep, seconds)


async def test_a_reply_that_came_while_the_loop_stalled_past_the_bound_is_read(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    """The backend answered in time; this process was not running when the bound's deadline
    passed. Not a failure: the write is done, nothing backs off, the next lookup is answered."""
    loop = asyncio.get_running_loop()
    store = wrap(inner, seen, clock, op_timeout_seconds=0.1, backoff_seconds=1.5)
    inner.data["earlier"] = b"v"
    inner.reply = loop.create_future()
    loop.call_later(0.01, inner.reply.set_result, None)  # the answer comes at once...
    stall(loop, 0.005, 0.3)  # ...while the loop stands still for three times the bound
    await store.put(["turn"], b"w")
    assert await store.get_many(["earlier", "turn"]) == [b"v", b"w"]
    assert seen == [("scripted", "put", "ok"), ("scripted", "get", "hit"), ("scripted", "get", "hit")]
    assert store.queued == 0


async def test_a_backend_that_never_answers_is_cut_off_though_the_loop_stalled(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock, op_timeout_seconds=0.05)
    inner.hang = True
    stall(asyncio.get_running_loop(), 0.001, 0.2)
    assert await store.get_many(["a"]) == [None]
    stall(asyncio.get_running_loop(), 0.06, 0.1)  # after the deadline passed on time: no grace
    assert await store.get_many(["a"]) == [None]
    assert seen == [("scripted", "get", "timeout"), ("scripted", "get", "timeout")]


async def test_an_unreachable_ping_is_an_error(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.ping_result = False
    assert await store.ping() is False
    assert seen == [("scripted", "ping", "error")]


async def test_a_reply_of_the_wrong_length_is_an_error(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.short_reply = True
    assert await store.get_many(["a", "b"]) == [None, None]
    assert seen == [("scripted", "get", "error")] * 2


async def test_back_off_skips_the_backend_until_it_elapses(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock, backoff_seconds=2.0)
    inner.error = ConnectionError("down")
    await store.get_many(["a"])
    inner.error = None  # the backend is back, but the wrapper does not know yet
    clock.advance(1.9)
    assert await store.get_many(["a", "b"]) == [None, None]
    await store.put(["a"], b"v")
    assert inner.calls == ["get"]  # both skipped
    assert seen == [("scripted", "get", "error")] * 3 + [
        ("scripted", "put", "error"),
        ("scripted", "retry", "queued"),
    ]

    clock.advance(0.2)
    seen.clear()
    await store.put(["a"], b"v")
    assert await store.get_many(["a"]) == [b"v"]
    assert inner.calls == ["get", "put", "get"]
    assert seen == [("scripted", "put", "ok"), ("scripted", "get", "hit")]


async def test_a_failed_ping_starts_the_back_off_and_a_good_one_ends_it(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock, backoff_seconds=2.0)
    inner.ping_result = False
    assert await store.ping() is False
    assert await store.get_many(["a"]) == [None]
    assert inner.calls == ["ping"]
    inner.ping_result = True
    assert await store.ping() is True
    await store.put(["a"], b"v")
    assert inner.calls == ["ping", "ping", "put"]


async def test_without_back_off_every_call_reaches_the_backend(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.error = ConnectionError("down")
    for _ in range(3):
        await store.get_many(["a"])
    assert inner.calls == ["get", "get", "get"]


async def test_a_failing_metrics_callback_does_not_fail_the_store(
    inner: ScriptedStore, clock: FakeClock
) -> None:
    def broken(backend: str, op: str, outcome: str) -> None:
        raise RuntimeError("metrics bug")

    store = FailOpenStore(inner, broken, clock=clock)
    await store.put(["a"], b"v")
    assert await store.get_many(["a"]) == [b"v"]


async def test_works_without_a_callback(inner: ScriptedStore) -> None:
    store = FailOpenStore(inner)
    inner.error = ConnectionError("down")
    assert await store.get_many(["a"]) == [None]
    assert await store.ping() is False


async def test_cancellation_is_not_swallowed(inner: ScriptedStore, clock: FakeClock) -> None:
    store = wrap(inner, [], clock)
    inner.hang = True
    task = asyncio.create_task(store.get_many(["a"]))
    await inner.called.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_close_failures_are_swallowed(inner: ScriptedStore, seen: list[Op], clock: FakeClock) -> None:
    store = wrap(inner, seen, clock)
    inner.error = OSError("disk gone")
    await store.close()
    assert inner.calls == ["close"] and seen == []


async def test_a_failed_write_is_readable_meanwhile_and_written_once_the_backend_is_back(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.error = ConnectionError("down")
    await store.put(["a", "b"], b"v")
    assert store.queued == 2
    assert await store.get_many(["a", "x"]) == [b"v", None]  # a from the queue, x asked for
    assert await store.flush() is False  # still down: kept
    inner.error = None
    assert await store.flush() is True
    assert inner.data == {"a": b"v", "b": b"v"} and store.queued == 0
    assert ("scripted", "retry", "ok") in seen
    assert seen.count(("scripted", "retry", "ok")) == 2  # one per key written


async def test_the_background_retry_writes_the_queue_without_being_asked(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.error = ConnectionError("down")
    await store.put(["a"], b"v")
    inner.error = None
    for _ in range(400):  # the first retry comes after 0.25 s
        if not store.queued:
            break
        await asyncio.sleep(0.01)
    assert inner.data == {"a": b"v"}
    await store.close()


async def test_beyond_its_bound_the_queue_drops_the_oldest_and_counts_them(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock, retry_queue_entries=3, retry_queue_bytes=1 << 20)
    inner.error = ConnectionError("down")
    for n in range(5):
        await store.put([f"k{n}"], b"v")
    assert store.queued == 3
    assert seen.count(("scripted", "retry", "dropped")) == 2
    assert await store.get_many(["k0", "k4"]) == [None, b"v"]
    inner.error = None
    assert await store.flush() is True
    assert sorted(inner.data) == ["k2", "k3", "k4"]
    small = wrap(ScriptedStore(), seen, clock, retry_queue_bytes=10)
    small.inner.error = ConnectionError("down")  # type: ignore[attr-defined]
    await small.put(["big"], b"x" * 11)  # larger than the byte bound: dropped at once
    assert small.queued == 0


async def test_a_newer_write_replaces_a_queued_one(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    store = wrap(inner, seen, clock)
    inner.error = ConnectionError("down")
    await store.put(["a"], b"old")
    inner.error = None
    await store.put(["a"], b"new")
    assert store.queued == 0
    assert await store.flush() is True
    assert inner.data == {"a": b"new"}


async def test_a_lookup_that_must_not_fail_open_raises(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock
) -> None:
    from gateway.store.base import StoreUnavailable

    store = wrap(inner, seen, clock, backoff_seconds=2.0)
    inner.error = ConnectionError("down")
    with pytest.raises(StoreUnavailable):
        await store.get_many(["a"], fail_open=False)
    with pytest.raises(StoreUnavailable):  # backing off: not even tried
        await store.get_many(["a"], fail_open=False)
    assert inner.calls == ["get"]
    assert await store.get_many(["a"]) == [None]  # the default still fails open
    inner.error = None
    clock.advance(2.1)
    assert await store.get_many(["a"], fail_open=False) == [None]  # a real miss is a miss


async def test_a_lookup_of_many_keys_is_reported_once_per_outcome_with_its_count(
    inner: ScriptedStore, clock: FakeClock
) -> None:
    calls: list[tuple[object, ...]] = []
    store = FailOpenStore(inner, lambda *call: calls.append(call), clock=clock)
    await store.put(["a", "b"], b"v")
    keys = ["a", "b", *(f"x{n}" for n in range(500))]  # a long transcript's assistant turns
    await store.get_many(keys)
    assert calls == [
        ("scripted", "put", "ok"),
        ("scripted", "get", "hit", 2),
        ("scripted", "get", "miss", 500),
    ]


async def test_the_failure_that_starts_a_back_off_says_so(
    inner: ScriptedStore, seen: list[Op], clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The lookups a back-off skips are only counted: the warning of the failure that began it is
    where a missed record is explained."""
    store = wrap(inner, seen, clock, backoff_seconds=1.5)
    inner.error = TimeoutError()
    await store.put(["a"], b"v")
    inner.error = None
    assert await store.get_many(["b"]) == [None]  # skipped
    assert inner.calls == ["put"]
    assert [r.getMessage() for r in caplog.records] == [
        "continuity store scripted put failed (TimeoutError: ); failing open; backing off 1.5 s (lookups miss)"
    ]
