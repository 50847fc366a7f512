"""Headless Chromium for the UI page tests: Debian's chromium, installed by .ci/install-browser
(CI runs it first; a developer machine without a chromium gets it here, once), driven by
Playwright with the flags that keep it off the network."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / ".ci" / "install-browser"
# no background services, updates, sync or QUIC: the machine's network is closed, and a browser
# test talks to loopback only
FLAGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def find_chromium() -> str | None:
    return os.environ.get("GATEWAY_TEST_CHROMIUM") or shutil.which("chromium")


@pytest.fixture(scope="session")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        done = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True)
        path = find_chromium()
        if path is None:
            pytest.fail(f"no chromium, and {INSTALL} could not install it:\n{done.stderr}")
    return path


class Browser:
    """One page in a fresh headless Chromium, with what the page reported as errors."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)


@asynccontextmanager
async def browser_page(chromium: str) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
        try:
            yield Browser(await browser.new_page())
        finally:
            await browser.close()
