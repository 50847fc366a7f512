"""The event loop the gateway runs on: uvloop when it is installed (the optional `uvloop` extra)
and the config does not say otherwise, else asyncio's own. bench/README.md has the figures that
justify it."""

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
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if choice == "uvloop":
            raise
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoopChoice = "auto") -> T:
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)
