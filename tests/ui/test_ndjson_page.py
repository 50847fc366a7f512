"""The example UI page (gateway/ui/ndjson.html, the README's browser example) in headless
Chromium against the gateway on the simulators: what a person sees of the NDJSON stream."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from gateway.simulators.base import Fault, Reply, SimulatorHub, ToolCallSpec
from tests.e2e.ndjson_client import ndjson_gateway
from tests.e2e.scenarios import KIND, NAMES
from tests.routing.sim_stack import eventually
from tests.ui.conftest import Browser, browser_page

THINK = "The user asks for the weather, so I call the tool."
TEXT = "Let me look that up <b>for you</b>."  # markup in model output is shown as text
NO_THINKING = {"openai_chat"}  # Chat Completions returns no reasoning text


@pytest.fixture
async def hub() -> AsyncIterator[SimulatorHub]:
    async with SimulatorHub(handler_cancellation=True) as hub:
        yield hub


async def ask(browser: Browser, url: str, model: str) -> None:
    page = browser.page
    await page.goto(f"{url}/ui/ndjson.html")
    await page.fill("#model", model)
    await page.fill("#prompt", "What is the weather in Paris?")
    await page.click("#send")


async def shown(browser: Browser) -> list[list[str]]:
    return await browser.page.eval_on_selector_all(
        "#out > div", "els => els.map(e => [e.className, e.textContent])"
    )


async def status_when_done(browser: Browser) -> str:
    """The status line once the answer ended (locators wait without evaluating script strings,
    which the page's Content-Security-Policy forbids)."""
    status = browser.page.locator("#status").filter(has_text=re.compile(r"^(finish|error|HTTP)"))
    await status.wait_for(state="attached")
    return await status.text_content() or ""


@pytest.mark.parametrize("name", NAMES, ids=[KIND[n] for n in NAMES])
async def test_the_page_shows_thinking_text_and_the_tool_call(chromium, hub, name):
    hub.states[KIND[name]].push(
        Reply(reasoning=THINK, text=TEXT, tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})])
    )
    async with ndjson_gateway(hub) as gw, browser_page(chromium) as browser:
        await ask(browser, gw.url, name)
        status = await status_when_done(browser)
        blocks = await shown(browser)
        bold = await browser.page.query_selector("#out b")
    thinking = [] if KIND[name] in NO_THINKING else [["thinking", THINK]]
    assert blocks == [*thinking, ["text", TEXT], ["tool_call", 'get_weather({"city":"Paris"})']]
    assert re.fullmatch(r"finish: tool_calls, tokens in [1-9]\d* out [1-9]\d*", status), status
    assert bold is None
    assert browser.errors == []  # the page's script ran under its Content-Security-Policy


async def test_the_page_renders_lines_while_the_answer_streams(chromium, hub):
    state = hub.states["anthropic"]
    story = "Once upon a time, " * 30
    state.push(Fault(after_events=8, mid_stream="stall", stall_seconds=60.0, reply=Reply(text=story)))
    async with ndjson_gateway(hub) as gw, browser_page(chromium) as browser:
        await ask(browser, gw.url, "claude")
        await browser.page.locator("#out .text").filter(has_text="Once upon").wait_for()
        partial = await shown(browser)
        status = await browser.page.text_content("#status")
        assert state.open_streams == 1, "the upstream is still streaming"
    assert status == "streaming…"
    assert [kind for kind, _ in partial] == ["text"]
    assert story.startswith(partial[0][1]) and len(partial[0][1]) < len(story)
    await eventually(lambda: state.open_streams == 0)


async def test_the_page_shows_an_error_line_and_an_error_envelope(chromium, hub):
    state = hub.states["anthropic"]
    state.push(
        Fault(after_events=6, mid_stream="error", error_type="overloaded_error", reply=Reply(text="x" * 100))
    )
    async with ndjson_gateway(hub) as gw, browser_page(chromium) as browser:
        await ask(browser, gw.url, "claude")
        after_commit = await status_when_done(browser)
        await ask(browser, gw.url, "no-such-model")
        before_commit = await status_when_done(browser)
    assert after_commit.startswith("error (overloaded): ")
    assert before_commit.startswith("HTTP 404: model 'no-such-model' is not a configured model group")


async def test_the_page_sends_the_gateway_token_it_is_given(chromium, hub):
    """With [auth] on, the page itself is served without a token and its API call carries the one
    typed into it."""
    hub.states["mistral"].push(Reply(reasoning=THINK, text="Hello."))
    async with ndjson_gateway(hub, token="ui-test-token-0123456789") as gw, browser_page(chromium) as browser:
        await ask(browser, gw.url, "mistral")
        refused = await status_when_done(browser)
        await browser.page.fill("#token", "ui-test-token-0123456789")
        await browser.page.click("#send")
        done = await status_when_done(browser)
        blocks = await shown(browser)
    assert refused.startswith("HTTP 401: missing or invalid bearer")
    assert done.startswith("finish: end_turn")
    assert blocks == [["thinking", THINK], ["text", "Hello."]]
