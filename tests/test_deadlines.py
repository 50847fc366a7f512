"""One timer for many deadlines (gateway/deadlines.py): each call is due at its own deadline, a
call removed never is, a call may be added again when due, and the timer follows the soonest
deadline left.

The book's behaviour is checked on a clock the test moves (`Clock`): what is due, and what is not
yet, at an instant. Slept out on a real loop, "not yet" at 50 ms failed under load (a loop stalled
past the next deadline fires it in the same pass: what the book does on purpose, see
`test_a_loop_late_past_several_deadlines_hands_them_all_over_in_one_pass`). One test runs the book
on a real loop, waiting for the calls rather than for a time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from operator import methodcaller
from typing import Any

from gateway.deadlines import Deadlines


class Clock:
    """What Deadlines uses of an event loop, on a clock moved by `run_until`: the timers due by
    then run in order of their time (then of arming), each at its time, as a loop that is on time
    runs them; `run_until(t, late=True)` runs them all at `t`, as a loop that stalled until `t`."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.armed = 0  # timers armed, cancelled or not
        self.reported: list[dict[str, Any]] = []
        self._timers: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[..., None], *args: Any) -> Timer:
        timer = Timer(callback, args)
        self.armed += 1
        heapq.heappush(self._timers, (when, next(self._order), timer))
        return timer

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        self.reported.append(context)

    def pending(self) -> list[float]:
        """When the timers not cancelled will run."""
        return sorted(when for when, _, timer in self._timers if not timer.cancelled)

    def run_until(self, until: float, late: bool = False) -> None:
        while self._timers and self._timers[0][0] <= until:
            when, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self.now = until if late else max(self.now, when)
                timer.callback(*timer.args)
        self.now = until


class Timer:
    __slots__ = ("callback", "args", "cancelled")

    def __init__(self, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.callback, self.args, self.cancelled = callback, args, False

    def cancel(self) -> None:
        self.cancelled = True


class Call:
    def __init__(self, log: list[tuple[str, float]], name: str, clock: Clock) -> None:
        self.log, self.name, self.clock = log, name, clock

    def expire(self) -> None:
        self.log.append((self.name, self.clock.time()))


def _book(clock: Clock) -> tuple[Deadlines, list[tuple[str, float]], Callable[[str], Call]]:
    log: list[tuple[str, float]] = []
    return Deadlines(methodcaller("expire")), log, lambda name: Call(log, name, clock)


def test_each_call_expires_at_its_own_deadline_unless_removed():
    clock = Clock()
    book, log, call = _book(clock)
    start = clock.time()
    late, early, gone, later = map(call, ("late", "early", "gone", "later"))
    book.add(late, start + 0.15, clock)
    book.add(early, start + 0.05, clock)  # sooner than the armed timer: re-armed for it
    book.add(gone, start + 0.08, clock)
    book.add(later, start + 0.25, clock)
    book.remove(gone)
    book.remove(gone)  # twice: nothing
    assert len(book) == 3
    assert clock.pending() == [start + 0.05] and clock.armed == 2
    clock.run_until(start + 0.1)
    assert log == [("early", start + 0.05)]
    assert len(book) == 2 and clock.pending() == [start + 0.15]
    clock.run_until(start + 0.4)
    assert log == [("early", start + 0.05), ("late", start + 0.15), ("later", start + 0.25)]
    assert len(book) == 0 and clock.pending() == []


def test_a_removed_call_leaves_the_timer_to_fire_for_nothing_and_rearm():
    clock = Clock()
    book, log, call = _book(clock)
    first, second = call("first"), call("second")
    start = clock.time()
    book.add(first, start + 0.03, clock)
    book.add(second, start + 0.09, clock)  # later than the armed timer: nothing armed
    book.remove(first)
    assert clock.pending() == [start + 0.03] and clock.armed == 1
    clock.run_until(start + 0.05)  # fired for the removed one: armed again for the second
    assert log == [] and len(book) == 1
    assert clock.pending() == [start + 0.09] and clock.armed == 2
    clock.run_until(start + 0.13)
    assert log == [("second", start + 0.09)] and clock.pending() == []


def test_a_loop_late_past_several_deadlines_hands_them_all_over_in_one_pass():
    # what a timer of its own per call would have done once the loop ran again: all are due
    clock = Clock()
    book, log, call = _book(clock)
    start = clock.time()
    for name, due in (("a", 0.03), ("b", 0.09), ("c", 0.2)):
        book.add(call(name), start + due, clock)
    clock.run_until(start + 0.1, late=True)
    assert log == [("a", start + 0.1), ("b", start + 0.1)]
    # one pass: armed once for "a", then once for what is left
    assert len(book) == 1 and clock.pending() == [start + 0.2] and clock.armed == 2


def test_a_failing_expiry_does_not_keep_the_others_alive():
    clock = Clock()
    book, log, call = _book(clock)

    class Broken:
        def expire(self) -> None:
            raise RuntimeError("broken")

    start = clock.time()
    book.add(Broken(), start + 0.02, clock)
    book.add(call("other"), start + 0.02, clock)
    clock.run_until(start + 0.06)
    assert [name for name, _ in log] == ["other"]
    assert [context["message"] for context in clock.reported] == ["a deadline's handler failed"]
    assert type(clock.reported[0]["exception"]) is RuntimeError


def test_a_call_added_again_when_due_is_due_again_later():
    """The idle watchdog's way: checked when due, it may ask to be checked again."""
    clock = Clock()
    seen: list[float] = []

    def on_due(call: object) -> None:
        seen.append(clock.time())
        if len(seen) < 3:
            book.add(call, clock.time() + 0.02, clock)

    book = Deadlines(on_due)
    start = clock.time()
    book.add("stream", start + 0.02, clock)
    clock.run_until(start + 0.15)
    assert seen == [start + 0.02, start + 0.04, start + 0.06]
    assert len(book) == 0 and clock.pending() == []


async def test_deadlines_on_a_real_loop_fire_in_time_never_before():
    # the loop's own timers: every call handed over once its deadline passed, whatever the load
    # (waited for, not slept out); a removed one never
    loop = asyncio.get_running_loop()
    fired: dict[str, float] = {}
    all_due = loop.create_future()
    dues = {"early": 0.01, "late": 0.04, "again": 0.02}

    def on_due(name: str) -> None:
        fired[name] = loop.time()
        if name == "again" and "again" not in added_again:
            added_again.append(name)
            del fired[name]
            dues[name] = 0.05
            book.add(name, start + 0.05, loop)
        elif len(fired) == len(dues) and not all_due.done():
            all_due.set_result(None)

    added_again: list[str] = []
    book = Deadlines(on_due)
    start = loop.time()
    for name, due in dues.items():
        book.add(name, start + due, loop)
    book.add("gone", start + 0.015, loop)
    book.remove("gone")
    await asyncio.wait_for(all_due, 60)  # not a time limit: a book that never fires fails, not hangs
    assert sorted(fired) == ["again", "early", "late"] and len(book) == 0
    for name, at in fired.items():
        assert at >= start + dues[name] - 0.002, name  # never before its deadline (the clock's ms)
