"""gateway/offload.py: a large request's jobs run in the worker thread with the cyclic collector
paused, and what they leave stays out of the collector's sight until the request ends. Checked
through `gc.callbacks` (which thread each collection ran in) and `gc.get_objects()` (the
generations a collection walks), never by timing."""

from __future__ import annotations

import asyncio
import gc
import threading
import traceback
from collections.abc import Iterator

import pytest

from gateway.offload import Offload

# containers a job makes: with the threshold below, collections would run inside the job
MADE = 50_000


@pytest.fixture
def collections() -> Iterator[list[tuple[str, int]]]:
    """(thread name, generation) of every collection while the test runs, the youngest
    generation collected every 100 allocations as a large request's would be, many times over."""
    seen: list[tuple[str, int]] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append((threading.current_thread().name, info["generation"]))

    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    gc.set_threshold(100, 10, 10)
    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*threshold)
        assert gc.isenabled()
        assert gc.get_freeze_count() == frozen, "a test left objects frozen"


def make(marker: str) -> list[list[str]]:
    return [[marker] for _ in range(MADE)]


def walked() -> set[int]:
    """Ids of what the collector's generations hold (the frozen ones are not among them)."""
    return {id(o) for o in gc.get_objects()}


async def settle() -> None:
    """`Offload.end` thaws after the current callback."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_a_job_runs_with_the_collector_paused_and_what_it_made_is_out_of_its_sight_until_the_end(
    collections,
):
    offload = Offload()
    made = await offload.run(make, "a")
    assert not [c for c in collections if c[0].startswith("gateway-offload")], "no collection in the job"
    assert gc.isenabled()
    held = walked()
    assert id(made) not in held and not any(id(item) in held for item in made[:100])

    collections.clear()
    again = await offload.run(make, "b")  # the request's next step: out of sight as well
    assert not [c for c in collections if c[0].startswith("gateway-offload")]
    held = walked()
    assert id(made) not in held and id(again) not in held

    offload.end()
    await settle()
    held = walked()
    assert id(made) in held and id(again) in held, "thawed once the request ended"


async def test_what_two_requests_froze_waits_for_the_last_of_them(collections):
    first, second = Offload(), Offload()
    one = await first.run(make, "one")
    two = await second.run(make, "two")
    first.end()
    await settle()
    held = walked()
    assert id(one) not in held and id(two) not in held, "the second request still holds the freeze"
    second.end()
    await settle()
    held = walked()
    assert id(one) in held and id(two) in held


async def test_a_request_that_ended_while_its_job_ran_leaves_nothing_frozen(collections):
    """Its client went away: the job finishes in the worker and its result is dropped."""
    frozen = gc.get_freeze_count()
    offload = Offload()
    started, release = threading.Event(), threading.Event()

    def slow() -> list[list[str]]:
        started.set()
        release.wait(10)
        return make("late")

    job = asyncio.ensure_future(offload.run(slow))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
    offload.end()
    release.set()
    made = await job
    assert gc.get_freeze_count() == frozen
    assert id(made) in walked()


async def test_a_collector_the_operator_turned_off_stays_off():
    gc.disable()
    try:
        offload = Offload()
        await offload.run(make, "x")
        assert not gc.isenabled()
        offload.end()
        await settle()
    finally:
        gc.enable()


async def test_what_a_failed_jobs_frames_held_is_freed_in_the_worker_not_where_its_error_is_handled():
    """The error travels to the event loop with its traceback: the frames' locals (a long
    message's validated half) would be freed there, holding the loop as long."""
    import weakref

    class Held:
        pass

    refs: list[weakref.ref[Held]] = []

    def fails() -> None:
        held = Held()
        refs.append(weakref.ref(held))
        try:
            raise KeyError("inner")
        except KeyError:
            raise ValueError("a bad part") from None

    offload = Offload()
    try:
        with pytest.raises(ValueError, match="a bad part") as raised:
            await offload.run(fails)
        assert refs[0]() is None, "freed before the error reached the event loop"
        assert "fails" in "".join(traceback.format_tb(raised.value.__traceback__)), (
            "the traceback still says where"
        )
    finally:
        offload.end()
        await settle()
