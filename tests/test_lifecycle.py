"""The young collection once the last request in flight has left (gateway/lifecycle.py
`IDLE_YOUNG`): in the loop's next pass when the youngest generation holds enough objects, never
while a request is in flight (one still open, or one that came in meanwhile) nor while the
collector is paused (gateway/offload.py)."""

from __future__ import annotations

import asyncio
import gc

import pytest

from gateway import lifecycle
from gateway.lifecycle import InFlight

YOUNG = 1000


class _Request:
    """InFlight keys requests by identity; nothing else of them is read here."""


@pytest.fixture
def collections(monkeypatch):
    """The generations collected from here on; the collector collects only when told to."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.set_threshold(10**9)
    monkeypatch.setattr(lifecycle, "IDLE_YOUNG", YOUNG)
    seen: list[int] = []

    def heard(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            seen.append(info["generation"])

    gc.callbacks.append(heard)
    yield seen
    gc.callbacks.remove(heard)
    gc.set_threshold(*thresholds)


def _young(count: int) -> list[list[object]]:
    return [[] for _ in range(count)]  # tracked containers, kept alive by the caller


async def test_the_last_request_leaving_collects_the_young_after_its_step(collections):
    flight, first, second = InFlight(), _Request(), _Request()
    flight.enter(first)
    flight.enter(second)
    kept = _young(2 * YOUNG)
    flight.leave(first)
    await asyncio.sleep(0)
    assert collections == []  # another request is in flight
    flight.leave(second)
    assert collections == []  # not within the leaving request's own step
    await asyncio.sleep(0)
    assert collections == [0]
    assert gc.get_count()[0] < YOUNG and len(kept) == 2 * YOUNG


async def test_few_young_objects_are_left_alone(collections):
    flight, request = InFlight(), _Request()
    gc.collect(0)
    collections.clear()  # that one
    flight.enter(request)
    flight.leave(request)
    await asyncio.sleep(0)
    assert collections == []


async def test_a_request_come_in_meanwhile_or_a_paused_collector_skips_it(collections):
    flight, request, newcomer = InFlight(), _Request(), _Request()
    flight.enter(request)
    kept = _young(2 * YOUNG)
    flight.leave(request)
    flight.enter(newcomer)  # before the next pass
    await asyncio.sleep(0)
    assert collections == []
    gc.disable()
    try:
        flight.leave(newcomer)
        await asyncio.sleep(0)
    finally:
        gc.enable()
    assert collections == [] and len(kept) == 2 * YOUNG
    flight.enter(request)
    flight.leave(request)  # scheduled again once the earlier one was skipped
    await asyncio.sleep(0)
    assert collections == [0]
