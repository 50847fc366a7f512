"""Many deadlines behind one loop timer: the `total` limit of every provider call in flight and
the idle watchdog of every stream (gateway/upstream.py). A call adds its deadline when it starts
and removes it when it ends (a dict entry each); one timer, armed at the soonest deadline known
when it was armed, hands what is due to `on_due` when it fires and is armed again for the soonest
left. Under uvloop a timer of its own per call cost ~5 us to arm and cancel, on every request,
for limits that almost never fire.

Calls on one client start in order with equal limits, so a new deadline is nearly always later
than the armed one: adding it arms nothing. The timer then fires about once per limit (600 s by
default) finding nothing due, and is armed for the oldest call still in flight.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Hashable


class Deadlines:
    """The deadlines of the calls in flight on one event loop (a client's connections belong to
    one loop: so does its book). `on_due(call)` when a call's deadline passed (it may add the
    call again)."""

    __slots__ = ("_on_due", "_due", "_timer", "_at")

    def __init__(self, on_due: Callable[[Hashable], None]) -> None:
        self._on_due = on_due
        self._due: dict[Hashable, float] = {}  # call -> its deadline on the loop's clock
        self._timer: asyncio.TimerHandle | None = None
        self._at = math.inf  # when the timer fires (inf: not armed)

    def __len__(self) -> int:
        """The calls whose deadline is still pending."""
        return len(self._due)

    def add(self, call: Hashable, when: float, loop: asyncio.AbstractEventLoop) -> None:
        self._due[call] = when
        if when < self._at:
            if self._timer is not None:
                self._timer.cancel()
            self._at = when
            self._timer = loop.call_at(when, self._fire, loop)

    def remove(self, call: Hashable) -> None:
        """The call ended (safe to call more than once). The timer stays armed: at worst it fires
        once for nothing and is armed again for the soonest deadline left."""
        self._due.pop(call, None)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        # due: every deadline the timer was armed for or before (what a timer of its own would
        # have fired for now), and any the clock has passed meanwhile
        limit = max(self._at, loop.time())
        self._timer = None
        self._at = math.inf
        due = [call for call, when in self._due.items() if when <= limit]
        for call in due:
            del self._due[call]
        if self._due:
            soonest = min(self._due.values())
            self._at = soonest
            self._timer = loop.call_at(soonest, self._fire, loop)
        on_due = self._on_due
        for call in due:
            try:
                on_due(call)
            except Exception as exc:  # one call's failure must not leave the others unexpired
                loop.call_exception_handler({"message": "a deadline's handler failed", "exception": exc})
