"""One timer for many deadlines (gateway/deadlines.py): each call is due at its own deadline, a
call removed never is, a call may be added again when due, and the timer follows the soonest
deadline left."""

from __future__ import annotations

import asyncio
from operator import methodcaller

from gateway.deadlines import Deadlines


class Call:
    def __init__(self, log: list[tuple[str, float]], name: str) -> None:
        self.log, self.name = log, name

    def expire(self) -> None:
        self.log.append((self.name, asyncio.get_running_loop().time()))


async def test_each_call_expires_at_its_own_deadline_unless_removed():
    loop = asyncio.get_running_loop()
    book = Deadlines(methodcaller("expire"))
    log: list[tuple[str, float]] = []
    start = loop.time()
    late, early, gone, later = (Call(log, n) for n in ("late", "early", "gone", "later"))
    book.add(late, start + 0.15, loop)
    book.add(early, start + 0.05, loop)  # sooner than the armed timer: re-armed for it
    book.add(gone, start + 0.08, loop)
    book.add(later, start + 0.25, loop)
    book.remove(gone)
    book.remove(gone)  # twice: nothing
    assert len(book) == 3
    await asyncio.sleep(0.1)
    assert [name for name, _ in log] == ["early"]
    assert len(book) == 2
    await asyncio.sleep(0.3)
    assert [name for name, _ in log] == ["early", "late", "later"]
    for (name, at), due in zip(log, (0.05, 0.15, 0.25), strict=True):
        assert at >= start + due - 0.002, name  # never before its deadline (the clock's ms)
    assert len(book) == 0


async def test_a_removed_call_leaves_the_timer_to_fire_for_nothing_and_rearm():
    loop = asyncio.get_running_loop()
    book = Deadlines(methodcaller("expire"))
    log: list[tuple[str, float]] = []
    first, second = Call(log, "first"), Call(log, "second")
    start = loop.time()
    book.add(first, start + 0.03, loop)
    book.add(second, start + 0.09, loop)  # later than the armed timer: nothing armed
    book.remove(first)
    await asyncio.sleep(0.05)  # fired for the removed one: armed again for the second
    assert log == [] and len(book) == 1
    await asyncio.sleep(0.08)
    assert [name for name, _ in log] == ["second"]


async def test_a_failing_expiry_does_not_keep_the_others_alive():
    loop = asyncio.get_running_loop()
    reported: list[str] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    book = Deadlines(methodcaller("expire"))
    log: list[tuple[str, float]] = []

    class Broken:
        def expire(self) -> None:
            raise RuntimeError("broken")

    start = loop.time()
    book.add(Broken(), start + 0.02, loop)
    book.add(Call(log, "other"), start + 0.02, loop)
    await asyncio.sleep(0.06)
    assert [name for name, _ in log] == ["other"]
    assert reported == ["a deadline's handler failed"]


async def test_a_call_added_again_when_due_is_due_again_later():
    """The idle watchdog's way: checked when due, it may ask to be checked again."""
    loop = asyncio.get_running_loop()
    seen: list[float] = []

    def on_due(call: object) -> None:
        seen.append(loop.time())
        if len(seen) < 3:
            book.add(call, loop.time() + 0.02, loop)

    book = Deadlines(on_due)
    start = loop.time()
    book.add("stream", start + 0.02, loop)
    await asyncio.sleep(0.15)
    assert len(seen) == 3 and len(book) == 0
    assert seen[2] >= start + 0.06 - 0.003
