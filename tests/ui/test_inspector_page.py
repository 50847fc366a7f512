"""The inspector page (gateway/ui/inspector.html) in headless Chromium: a Claude -> Gemini ->
Mistral tool loop runs through the gateway, and the page lists its requests live, shows the
dropped reasoning and the projected tool ids side by side, and previews another target."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import aiohttp
import pytest
from playwright.async_api import async_playwright

from gateway.simulators.base import SimulatorHub
from tests.e2e.ndjson_client import ndjson_gateway
from tests.inspector.loop import THINKING, inspector_gateway, run_loop, script
from tests.ui.conftest import FLAGS, browser_page

TOKEN = "inspector-page-token"


@pytest.fixture
async def hub() -> AsyncIterator[SimulatorHub]:
    async with SimulatorHub(handler_cancellation=True) as hub:
        yield hub


async def test_the_page_shows_what_each_turn_of_a_tool_loop_became(chromium, hub):
    script(hub)
    async with ndjson_gateway(hub) as gw, browser_page(chromium) as browser:
        page = browser.page
        await page.goto(f"{gw.url}/inspector")
        await page.locator("#live").filter(has_text="live").wait_for()
        loop = await run_loop(gw.url)  # while the page is open: the feed brings the requests in
        mistral = page.locator(f"#req-{loop.ids[2]}")
        await mistral.wait_for()
        assert await page.locator("#list button").count() == 3
        # keyboard only: focus the list, move with j/k, open with Enter
        await page.locator(f"#req-{loop.ids[2]}").focus()
        await page.keyboard.press("j")
        await page.keyboard.press("k")
        await page.keyboard.press("Enter")
        await page.locator("#detail h2").filter(has_text=loop.ids[2]).wait_for()

        client = page.locator("#detail > div .row.client")
        dropped = client.filter(has_text=THINKING["gemini"])
        assert await dropped.get_attribute("data-mark") == "dropped"
        assert await client.filter(has_text=THINKING["claude"]).get_attribute("data-mark") == "dropped"
        provider = page.locator("#detail > div .row.provider")
        calls = provider.and_(page.locator("[data-kind=tool_call]"))
        assert await calls.count() == 2
        for i in range(2):
            assert await calls.nth(i).get_attribute("data-mark") == "projected"
            tag = await calls.nth(i).locator(".tag").text_content()
            assert re.search(r"get_weather [A-Za-z0-9]{9}$", tag or ""), tag  # Mistral's id format
        assert await provider.filter(has_text=THINKING["gemini"]).count() == 0

        # what would Claude receive for the same request: its own thinking restored, no Gemini's
        await page.fill("#preview-model", "claude")
        await page.keyboard.press("Enter")
        await page.locator("#preview-target").filter(has_text="claude / claude-sonnet-4-5").wait_for()
        preview = page.locator("#preview-result .row.provider")
        assert await preview.filter(has_text=THINKING["claude"]).count() == 1
        assert await preview.filter(has_text=THINKING["gemini"]).count() == 0
        body = await page.locator("#preview-result pre").text_content()
        assert '"signature"' in (body or "")  # Claude's own signature goes back to Claude
        await page.screenshot(path="/tmp/inspector.png", full_page=False)
    assert browser.errors == []  # the page's script ran under its Content-Security-Policy
    assert len(hub.states["anthropic"].requests) == 1  # the preview called no provider


async def test_with_auth_the_browser_logs_in_once_and_sees_only_its_tokens_requests(chromium, hub):
    tokens = {"INSPECTOR_PAGE_TOKEN": TOKEN, "INSPECTOR_PAGE_OTHER": "another-tenant-token"}
    async with inspector_gateway(hub, tokens=tokens) as gw, async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, headless=True, args=FLAGS)
        try:
            context = await browser.new_context(http_credentials={"username": "me", "password": TOKEN})
            page = await context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(f"{gw.url}/inspector")
            await page.locator("#live").filter(has_text="live").wait_for()
            async with aiohttp.ClientSession() as session:
                ids = []
                for token in tokens.values():
                    body = {"model": "claude", "messages": [{"role": "user", "content": "Hi"}]}
                    headers = {"Authorization": f"Bearer {token}"}
                    async with session.post(f"{gw.url}/v1/chat/completions", json=body, headers=headers) as r:
                        ids.append(r.headers["X-Gateway-Request-Id"])
            await page.locator(f"#req-{ids[0]}").wait_for()  # through the live feed
            await page.reload()  # and through the list
            await page.locator(f"#req-{ids[0]}").click()
            await page.locator("#detail h2").filter(has_text=ids[0]).wait_for()
            assert await page.locator(f"#req-{ids[1]}").count() == 0  # the other token's request
        finally:
            await browser.close()
    assert errors == []
