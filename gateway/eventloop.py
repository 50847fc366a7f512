"""The event loop the gateway runs on: asyncio's own, or uvloop (the optional `uvloop` extra) when
`[server] event_loop = "uvloop"`. uvloop is opt-in because the bench shows no consistent gain: the
gateway's cost per request is Python work (decoding, repairing and encoding transcripts), not the
I/O that uvloop speeds up, and aiohttp already parses HTTP in C. Measure again with
`python bench/run.py --variant asyncio:loop=asyncio --variant uvloop:loop=uvloop` when that
changes (bench/README.md)."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")
EventLoopChoice = Literal["asyncio", "uvloop"]


def loop_factory(choice: EventLoopChoice) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for `asyncio.Runner`; None means asyncio's default loop. "uvloop" when it is
    not installed raises ImportError (config validation refuses that config first)."""
    if choice == "asyncio":
        return None
    return importlib.import_module("uvloop").new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice = "asyncio") -> T:
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)
