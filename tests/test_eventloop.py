"""gateway/eventloop.py: which loop `[server] event_loop` runs the gateway on."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import pytest

from gateway import eventloop

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None


@pytest.fixture
def without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError


def loop_module(choice: eventloop.EventLoopChoice) -> str:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__.split(".")[0]

    return eventloop.run(which(), choice)


def test_asyncio_is_asyncio_whatever_is_installed():
    assert eventloop.loop_factory("asyncio") is None
    assert loop_module("asyncio") == "asyncio"


def test_uvloop_without_the_extra_is_an_import_error(without_uvloop):
    with pytest.raises(ImportError):
        eventloop.loop_factory("uvloop")


@pytest.mark.skipif(not HAVE_UVLOOP, reason="the uvloop extra is not installed")
def test_uvloop_when_installed():
    assert loop_module("uvloop") == "uvloop"


def test_auto_takes_uvloop_when_it_is_installed_and_asyncio_otherwise(without_uvloop):
    assert eventloop.loop_factory("auto") is None
    assert loop_module("auto") == "asyncio"


@pytest.mark.skipif(not HAVE_UVLOOP, reason="the uvloop extra is not installed")
def test_auto_is_uvloop_when_installed():
    assert loop_module("auto") == "uvloop"
