"""The event loop the gateway runs on (`[server] event_loop`): "auto" (the default) takes uvloop
when the optional `uvloop` extra is installed and asyncio's own loop otherwise; "asyncio" and
"uvloop" choose. The bench shows uvloop cutting the gateway's CPU per request by about 6-11%
(small requests, fan-in, streams: bench/README.md) now that the transcript work is cheaper; the
gateway behaves the same on either.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")
EventLoopChoice = Literal["auto", "asyncio", "uvloop"]


def loop_factory(choice: EventLoopChoice) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for `asyncio.Runner`; None means asyncio's default loop. "uvloop" when it is
    not installed raises ImportError (config validation refuses that config first)."""
    if choice == "asyncio":
        return None
    if choice == "auto":
        try:
            return importlib.import_module("uvloop").new_event_loop
        except ImportError:
            return None
    return importlib.import_module("uvloop").new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice = "auto") -> T:
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)
