"""Large requests are worked on off the event loop.

Decoding, repairing and encoding a transcript is linear in its blocks: about 5-8 us each, so a
request within the default limits (200,000 one-character blocks, ~5 MB) held the event loop for
over a second, and every other client waited. A body of OFFLOAD_VALUES JSON values or more
(decided once, from a C-speed bound on its values, when it has been read: `offloads`) is parsed,
decoded, repaired and encoded in a worker thread (`off_loop`); the interpreter hands the GIL back
to the event loop every switch interval (5 ms), so the loop keeps answering while the thread
works. Smaller bodies stay on the loop: a thread hop costs more than their whole decode (an agent's
1,000-message turn holds ~15,000 values, ~1 MB).

One thread of its own, started with the app (`start`), takes every large request's work in turn:
asyncio's default executor starts a thread whenever none looks idle, and `Thread.start` blocks
the event loop until the new thread runs, which under a busy worker thread took up to 0.7 s. One
at a time is no loss (the GIL runs one anyway) and bounds how many large transcripts are being
worked on at once.

A large body is parsed with the transcript memo (gateway/ingress/memo.py) as any other, under the
memo's lock (gateway/ingress/split.py `parse_shared`): the event loop never waits for it (a body it
parses while the worker thread holds the lock is parsed whole, as without the memo). The repair
passes and encoders are pure, so they are safe to run in either thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")

# decoding, repairing and encoding cost ~2 us per JSON value (a 200,000-block chat body holds
# 600,000 and took over a second): a body below this many keeps the loop well under 100 ms
OFFLOAD_VALUES = 50_000


_worker: ThreadPoolExecutor | None = None


def start() -> None:
    """This process's worker thread, running (at app startup: after `--workers` forked)."""
    global _worker
    if _worker is None:
        _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-offload")
        _worker.submit(int).result()


async def off_loop(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`function(*args, **kwargs)` in the worker thread."""
    if _worker is None:
        start()
    return await asyncio.get_running_loop().run_in_executor(_worker, partial(function, *args, **kwargs))
