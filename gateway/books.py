"""A finished request's bookkeeping: its record, pricing, metrics, access-log line, inspector
capture and trace (`account`), done off the answer's latency and for several requests together.

At c=1 the bookkeeping of one request alone cost ~150-200 us of CPU (bench/c1_path.py `--tail`)
against ~12-20 us a request done back to back (bench/books.py): the code and data it touches have
left the CPU's caches by the time the next request ends. It ran right after the answer's write,
so the client's next request waited behind it. Small requests that end while others are in
flight are now held (`Books`) and accounted for together: when `BATCH` wait, `DELAY` after the
first of them, or as soon as anything reads what they update (a metrics read, the inspector's API,
the shutdown: `Books.settle`). A request that ends alone is accounted for in the loop's next pass,
with those held before it: held, a lone client's requests (c=1) waited behind a whole batch every
`BATCH` requests (bench c=1 p99 2.39 -> 3.51 ms with batches of 32, 1.26 -> 4.67 with 128; p50
and CPU a request not lower). A named key's request, a traced one and a large one are accounted for in the
loop's next pass, as every request was before, with those held before them: the key is charged
before its next request is admitted, the span ends with the request, and what a large one lets go
(the memo's held body, the resuming passes' retired conversations, its worker-thread work) is
bounded and freed at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sized
from typing import TYPE_CHECKING

from gateway.access_log import lines_held, log_access
from gateway.transcript.resume import release_retired, retired_waiting

if TYPE_CHECKING:
    from gateway.exchange import Exchange
    from gateway.metrics import RequestRecord
    from gateway.tracing import RequestTrace

log = logging.getLogger("gateway")

# requests held at most: a batch's bookkeeping (~40 us a request done together) is a stall of the
# loop that every request in flight waits behind (with 128, the bench's c=1 p99 went from 1.26 to
# 4.67 ms, its p50 unchanged)
BATCH = 32
# whether a request that ends with no other in flight is held too (tests of the holding set it)
HOLD_ALONE = False
# seconds the first held request waits at most (what a metrics scrape, the access log's file or the
# inspector's live feed can lag behind the answers, while requests keep coming)
DELAY = 0.05
# a request body from this size on is accounted for at once (it and what it made are freed then):
# at most BATCH smaller ones, 8 MiB of bodies and what they decoded to, wait
LARGE_BODY = 64 << 10


class Books:
    """The finished requests awaiting their bookkeeping, in the order they ended."""

    __slots__ = ("_pending", "_timer", "_soon", "_hold", "_in_flight")

    def __init__(self, hold: bool = True, in_flight: Sized = ()) -> None:
        """`hold`: False where another process reads what the bookkeeping updates (`gateway serve
        --workers`: a scrape of any worker reads every worker's figures, the inspector's API every
        worker's captures), which this one cannot settle: each request is accounted for in the
        loop's next pass. `in_flight`: the requests being handled, the one ending among them
        (gateway/lifecycle.py)."""
        self._hold = hold
        self._in_flight = in_flight
        self._pending: list[tuple[Exchange, float, Mapping[str, str]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._soon = False  # `settle` is scheduled in the loop's next pass

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, exchange: Exchange, ended: float, headers: Mapping[str, str]) -> None:
        """`ended`: the request's end on the monotonic clock; `headers`: the client's."""
        pending = self._pending
        pending.append((exchange, ended, headers))
        if self._soon:
            return
        alone = len(self._in_flight) <= 1 and not HOLD_ALONE
        if len(pending) >= BATCH or not self._hold or alone or _at_once(exchange):
            self._soon = True
            asyncio.get_running_loop().call_soon(self.settle)
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(DELAY, self.settle)

    def settle(self) -> None:
        """Every held request accounted for, now, in the order they ended: their access-log
        lines reach the file in one write (`lines_held`)."""
        self._soon = False
        timer = self._timer
        if timer is not None:
            self._timer = None
            timer.cancel()
        batch = self._pending
        if not batch:
            return
        self._pending = []
        # (the wall clock's time at 0 on the monotonic one)
        account_all(batch, time.time() - time.monotonic())


def _at_once(exchange: Exchange) -> bool:
    """Accounted for in the loop's next pass: a named key's request (what it used is charged
    before the key's next request is let in, as `KeyLimits.spend` starts it then), a traced one
    (its span ends when its bookkeeping runs), one whose body the memo waits to bound (`settle`:
    else the next request bounds it, on its way upstream), and what a request leaves behind to
    free (a large body, its worker thread's frozen objects, conversations the resuming passes
    retired)."""
    return (
        bool(exchange.key)
        or exchange.trace is not None
        or exchange.offload is not None
        or len(exchange.raw) >= LARGE_BODY
        or retired_waiting()
        or exchange.state.memo.unsettled()
    )


Ended = tuple["Exchange", float, Mapping[str, str]]
# an ended request with its record, its end on the monotonic clock and on the wall clock
_Done = tuple["Exchange", "RequestRecord", Mapping[str, str], float, float]


def account_all(batch: list[Ended], wall: float) -> None:
    """The bookkeeping of the ended requests of `batch` (each: the exchange, its end on the
    monotonic clock, the client's headers), in the order they ended; `wall`: the wall clock's time
    at 0 on the monotonic one. A request whose step fails is reported (as a callback's failure)
    and left out of its steps after that one; the others go on."""
    done: list[_Done] = []
    for exchange, ended, headers in batch:
        try:
            done.append((exchange, exchange.record(ended), headers, ended, ended + wall))
        except Exception as exc:
            _failed(exc)
    _account(done)


def account(
    exchange: Exchange, record: RequestRecord, headers: Mapping[str, str], ended: float, wall: float
) -> None:
    """One finished request's bookkeeping, its record made; `ended`: its end on the monotonic
    clock, `wall` on the wall clock (its access-log line's time and its capture's)."""
    _account([(exchange, record, headers, ended, wall)])


def _account(done: list[_Done]) -> None:
    """Step by step over the batch rather than request by request: each step's code and data stay
    in the CPU's caches for the whole batch, where a request's turn found those of its first steps
    evicted by its last ones (bench/served.py --concurrency 64 --model stub-d20 --tail, the batch's
    CPU a request, side by side: 53.9 / 46.3 us request by request, 42.6 / 36.5 step by step)."""
    if not done:
        return
    kept: list[_Done] = []
    for item in done:  # pricing, and a named key charged (what `GatewayState.observe` does first)
        try:
            item[0].state.price(item[1])
        except Exception as exc:
            _failed(exc)
        else:
            kept.append(item)
    for item in kept:  # the metrics (a failure is logged, the request goes on)
        item[0].state.count(item[1])
    done, kept = kept, []
    with lines_held():  # the access lines, in one write
        for item in done:
            try:
                log_access(item[1], int(item[4] * 1000))
            except Exception as exc:
                _failed(exc)
            else:
                kept.append(item)
    state = None
    for exchange, record, headers, ended, wall in kept:
        try:
            state = exchange.state
            state.inspector.capture(exchange, headers, ended, wall)
            exchange.cost_usd = record.cost_usd
            if exchange.trace is not None:
                _finish_trace(exchange.trace, exchange, record)
            if exchange.offload is not None:
                exchange.offload.end()  # what its worker-thread jobs froze is thawed (gateway/offload.py)
        except Exception as exc:
            _failed(exc)
    try:
        if state is not None:
            # a long body the memo holds for the next turn, bounded now that the answer is on its way
            state.memo.settle()
        # and the conversations the resuming passes let go are freed (gateway/transcript/resume.py)
        release_retired()
    except Exception as exc:
        _failed(exc)


def _failed(exc: Exception) -> None:
    # as a callback of its own: reported, the others go on
    asyncio.get_running_loop().call_exception_handler(
        {"message": "accounting for a finished request failed", "exception": exc}
    )


def _finish_trace(trace: RequestTrace, exchange: Exchange, record: RequestRecord) -> None:
    answer = exchange.answer
    error = answer.error if answer is not None else None
    repairs = (*exchange.restored, *(answer.repairs if answer is not None else ()))
    try:
        trace.finish(record, exchange.turn, error, repairs)
    except Exception:  # telemetry never fails a request that was answered
        log.exception("ending the trace of request %s failed", exchange.request_id)
