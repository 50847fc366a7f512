"""Large requests are worked on off the event loop, out of the cyclic collector's sight.

Decoding, repairing and encoding a transcript is linear in its blocks: about 5-8 us each, so a
request within the default limits (200,000 one-character blocks, ~5 MB) held the event loop for
over a second, and every other client waited. A body of OFFLOAD_VALUES JSON values or
OFFLOAD_BYTES or more (decided once, from a C-speed bound on its values and its size, when it has
been read: `offloads`) is parsed, decoded, repaired and encoded in a worker thread
(`Offload.run`); the interpreter hands the GIL back to the event loop every switch interval (5
ms) between two bytecodes, so the loop keeps answering while the thread works (one C call holds
it throughout: chat validates a long content list in slices for this, gateway/ingress/chat, and
a body of PIECES_VALUES or more is parsed in pieces, gateway/ingress/pieces.py; a smaller one by one
orjson call, shorter than a switch interval or two and half the cost of the pieces).
Smaller bodies stay on the loop: a thread hop costs more than their whole decode (an agent's
1,000-message turn holds ~15,000 values, ~1 MB).

One thread of its own, started with the app (`start`), takes every large request's work in turn:
asyncio's default executor starts a thread whenever none looks idle, and `Thread.start` blocks
the event loop until the new thread runs, which under a busy worker thread took up to 0.7 s. One
at a time is no loss (the GIL runs one anyway) and bounds how many large transcripts are being
worked on at once.

The garbage collector. A job makes about a million container objects that live as long as the
request (a 200,000-block body: the parsed lists, the transcript, the repaired copy). The collector
runs in whichever thread allocates and holds the GIL while it runs: with the serving thresholds
(gateway/serve.py) the youngest generation's survivors pile up in the middle one until a single
collection walks them all, some 160-490 ms during which the event loop answered no one (and a full
collection, once it is due, walks them again with everything else). None of it is garbage: the
request keeps them, and reference counting frees them when it ends. So while any job runs the
collector is paused, and when a job ends what it left (with everything else the collector tracks
then) is frozen (`gc.freeze`: moved in O(1) to a generation no collection walks) until every
request that froze objects has ended; then `gc.unfreeze` (O(1)) hands what still lives back to
the oldest generation. Cyclic garbage among frozen objects (the request's, and other requests'
that were alive at a freeze) is collected by the next full collection after that: delayed, not
lost. Objects made after a freeze are collected as usual, so a request that streams for minutes
holds back at most what was alive when its last job ended. What startup froze (gateway/serve.py)
goes back with the rest: full collections walk it again after the first thaw (~96,000 objects,
~25 ms a full collection).

A large body is parsed with the transcript memo (gateway/ingress/memo.py) as any other, under the
memo's lock (gateway/ingress/split.py `parse_shared`): the event loop never waits for it (a body it
parses while the worker thread holds the lock is parsed whole, as without the memo); what the memo
keeps of it is frozen and thawed with the rest. The repair passes and encoders are pure, so they
are safe to run in either thread.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

# decoding, repairing and encoding cost ~2 us per JSON value (a 200,000-block chat body holds
# 600,000 and took over a second): a body below this many keeps the loop well under 100 ms
OFFLOAD_VALUES = 50_000
# ... or this many bytes, whatever their values: parsing a 31 MB body of one string held the loop
# 32 ms in `orjson.loads` alone (134 ms on a loaded machine), and its encode for the provider
# another 12 ms; an 8 MiB one costs ~6 + 3 ms
OFFLOAD_BYTES = 8 << 20
# ... and one of this many values or more is parsed in pieces there (`parsed_in_pieces`): a whole
# parse holds the GIL ~60-110 ns a value (150,000 values of one-character blocks: ~10 ms), the
# pieces cost 2-3x that (an agent's 5,000-message turn, ~72,000 values in 5.6 MB: 6.6 ms whole,
# 15.5 ms in pieces, 6 ms of it the scan for what orjson would refuse)
PIECES_VALUES = 150_000
# a request continuing a kept conversation (`previous_response_id`) of this many blocks or more is
# repaired and encoded there too, whatever its own body: what the body's values bound says for a
# body (~3 values a block)
OFFLOAD_BLOCKS = OFFLOAD_VALUES // 3


_worker: ThreadPoolExecutor | None = None


def start() -> None:
    """This process's worker thread, running (at app startup: after `--workers` forked)."""
    global _worker
    if _worker is None:
        _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-offload")
        _worker.submit(int).result()


class Offload:
    """One large request's work off the event loop: each step `run` in the worker thread, and
    what the steps made kept out of the collector's sight until `end` (module docstring)."""

    __slots__ = ("_ended", "_frozen")

    def __init__(self) -> None:
        self._frozen = False  # this request holds the freeze (`_Collector.holders`)
        self._ended = False

    async def run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`function(*args, **kwargs)` in the worker thread, the collector paused meanwhile."""
        if _worker is None:
            start()
        job = partial(_collector.job, self, partial(function, *args, **kwargs))
        return await asyncio.get_running_loop().run_in_executor(_worker, job)

    def end(self) -> None:
        """The request ended (on the event loop): what its jobs froze is thawed once no other
        request holds the freeze, after the current callback (the request's own references,
        held by the frame that ends it, are gone by then, so little goes back to be walked)."""
        if _collector.release(self):
            asyncio.get_running_loop().call_soon(_collector.thaw)


class _Collector:
    """The process's collector, paused while any job runs and frozen while any request holds
    what a job left; both counted under a lock (the worker thread and the event loop's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0  # jobs running now
        self._enabled = True  # whether the collector was on when the first of them started
        self.holders = 0  # requests whose jobs froze objects and that have not ended

    def job(self, offload: Offload, call: Callable[[], T]) -> T:
        with self._lock:
            if not self._running:
                self._enabled = gc.isenabled()
                gc.disable()
            self._running += 1
        try:
            return call()
        except BaseException as exc:
            _clear_frames(exc)
            raise
        finally:
            with self._lock:
                # a request that ended meanwhile (its client went away) drops the result: nothing
                # of it to keep out of sight
                if not offload._ended:
                    gc.freeze()
                    if not offload._frozen:
                        offload._frozen = True
                        self.holders += 1
                self._running -= 1
                if not self._running and self._enabled:
                    gc.enable()

    def release(self, offload: Offload) -> bool:
        """Whether `offload` was the last holder of the freeze."""
        with self._lock:
            offload._ended = True
            if not offload._frozen:
                return False
            offload._frozen = False
            self.holders -= 1
            return not self.holders

    def thaw(self) -> None:
        with self._lock:
            if not self.holders:  # else another request froze since: its end thaws
                gc.unfreeze()


_collector = _Collector()


def _clear_frames(exc: BaseException) -> None:
    """What the frames of a failed job held (a 200,000-part message's validated half, the parsed
    body) is freed here, not wherever its error ends up (the event loop's thread, which would
    spend as long freeing it): the traceback keeps those frames, lines and code, not their
    locals. The errors it was raised from (`__context__`, `__cause__`) too."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        error = todo.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        traceback.clear_frames(error.__traceback__)
        todo += (error.__context__, error.__cause__)
