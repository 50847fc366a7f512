"""An operation's time limit on a remote store that counts the event loop's running time.

Shared by the continuity store's fail-open wrapper (gateway/store/failopen.py) and the client
keys' Redis counters (gateway/store/counters.py): both fail open when a remote store is slow, and
neither should call an answer that came in time a failure because this process was not running."""

from __future__ import annotations

import asyncio
from typing import Any

# An operation's bound counts time the event loop ran. Its timer firing later than this past the
# deadline means the loop was not running then (this process stalled: a long garbage collection,
# the process descheduled on a loaded machine), and a reply that came meanwhile is still unread:
# the operation gets a quarter of its bound again from when the loop woke, at most twice.
STALL_SECONDS = 0.05
STALL_GRACES = 2


class LoopTimeBound:
    """`asyncio.timeout(seconds)` (the same cancellation and TimeoutError) that a stalled loop
    does not expire (see STALL_SECONDS). Seen in the e2e suite under CPU load: a collection of
    1.6 s (0.3 s of CPU) while a Redis write waited for its reply expired the write's bound, the
    store backed off, and the next turn's lookup was skipped: a recorded turn lost from a Redis
    that had answered in time."""

    __slots__ = ("_seconds", "_loop", "_task", "_cancelling", "_timer", "_graces", "_expired")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    async def __aenter__(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._cancelling = task.cancelling()
        self._graces = STALL_GRACES
        self._expired = False
        due = loop.time() + self._seconds
        self._timer = loop.call_at(due, self._due, due)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        self._timer.cancel()
        # as asyncio.timeout: our cancellation becomes TimeoutError, anyone else's stays
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def _due(self, due: float) -> None:
        now = self._loop.time()
        if now - due > STALL_SECONDS and self._graces:
            self._graces -= 1
            again = now + self._seconds / 4
            self._timer = self._loop.call_at(again, self._due, again)
            return
        self._expired = True
        self._task.cancel()
