"""Codex-style rich history and overflow through the gateway.

- A Responses history holding what Codex keeps after a hosted web search (a `web_search_call`
  item, `url_citation` annotations on the answer, an image in a `function_call_output`), sent with
  the openai SDK (the real Codex only writes such items after OpenAI itself searched: the gateway
  relays another family's answer to it as text), moves to Anthropic and Gemini: accepted by their
  strict simulators, the search's query and sources and what was cited reach the model as text,
  counted; back at OpenAI the items replay intact.
- The real Codex CLI sees a context-window overflow on every family as its own
  ContextWindowExceeded ("Codex ran out of room in the model's context window").
"""

from __future__ import annotations

from pathlib import Path

import openai
import orjson
import pytest

from gateway.demo import FAMILIES
from gateway.simulators.base import Reply, SimulatorHub
from tests.clients import node_clis
from tests.e2e.gateway_stack import Gateway, config_with, serve
from tests.property.transcripts import PNG
from tests.sdk_timeout import SDK_TIMEOUT

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
SEARCH = {
    "type": "web_search_call",
    "id": "ws_0001",
    "status": "completed",
    "action": {
        "type": "search",
        "query": "weather in Paris today",
        "sources": [{"type": "url", "url": "https://weather.example/paris"}],
    },
}
ANSWER = "Paris is sunny today."
HISTORY = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
    SEARCH,
    {
        "type": "message",
        "role": "assistant",
        "content": [
            {
                "type": "output_text",
                "text": ANSWER,
                "annotations": [
                    {
                        "type": "url_citation",
                        "url": "https://weather.example/paris",
                        "title": "Paris weather",
                        "start_index": 0,
                        "end_index": 20,
                    }
                ],
            }
        ],
    },
    {"type": "function_call", "call_id": "call_shot", "name": "screenshot", "arguments": "{}"},
    {
        "type": "function_call_output",
        "call_id": "call_shot",
        "output": [{"type": "input_text", "text": "the page"}, {"type": "input_image", "image_url": PNG}],
    },
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And tomorrow?"}]},
]
TOOLS = [{"type": "function", "name": "screenshot", "parameters": {"type": "object", "properties": {}}}]


@pytest.fixture
async def hub():
    async with SimulatorHub() as hub:
        yield hub


def client(gateway: Gateway) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=gateway.v1, api_key="client-key-never-forwarded", max_retries=0, timeout=SDK_TIMEOUT
    )


@pytest.mark.parametrize(("name", "kind"), [("claude", "anthropic"), ("gemini", "gemini")])
async def test_web_search_history_moves_to_anthropic_and_gemini(hub, tmp_path, name, kind):
    async with serve(hub, config_with(hub)) as gateway:
        hub.states[kind].push(Reply(text="Sunny again tomorrow."))
        response = await client(gateway).responses.create(model=name, input=HISTORY, tools=TOOLS, store=False)
        assert response.output_text == "Sunny again tomorrow."
        state = hub.states[kind]
        assert state.rejections == []
        sent = orjson.dumps(state.requests[-1].body).decode()
        # the search as text: what was asked, what was found, what the answer cited
        assert "weather in Paris today" in sent and "https://weather.example/paris" in sent
        assert "Sources:" in sent and "Paris weather" in sent
        assert "ws_0001" not in sent  # OpenAI's item itself never reaches another family
        # the screenshot reached the model as an image (inside the result, or right after it)
        assert PNG.split(",", 1)[1] in sent
        for repair in ("server_tool_as_text", "citations_as_text"):
            assert gateway.sample("gateway_repairs_total", provider=name, kind=repair) > 0


async def test_web_search_history_replays_intact_to_openai(hub, tmp_path):
    async with serve(hub, config_with(hub)) as gateway:
        hub.states["openai_responses"].push(Reply(text="Sunny again tomorrow."))
        await client(gateway).responses.create(model="openai", input=HISTORY, tools=TOOLS, store=False)
        state = hub.states["openai_responses"]
        assert state.rejections == []
        body = state.requests[-1].body
        assert SEARCH in body["input"], "the web_search_call item went back as OpenAI issued it"
        message = next(i for i in body["input"] if i.get("role") == "assistant")
        assert message["content"][0]["annotations"][0]["type"] == "url_citation"
        assert gateway.sample("gateway_repairs_total", provider="openai", kind="server_tool_as_text") == 0


@pytest.mark.clients
@pytest.mark.parametrize("name,kind", FAMILY)
async def test_codex_sees_an_overflow_on_every_family_as_its_own(hub, tmp_path: Path, name, kind):
    clients = node_clis.install()
    async with serve(hub, config_with(hub)) as gateway:
        hub.states[kind].context_window = 10  # every request is too long
        work = tmp_path / "work"
        work.mkdir()
        cli = node_clis.Codex(clients, tmp_path / "home", gateway.v1, "client-key-never-forwarded")
        done = await cli.run("Say hi", work, model=name)
        assert done.returncode != 0
        assert "ran out of room in the model's context window" in done.stderr, done.stderr[-2000:]
        assert hub.states[kind].rejections, "the simulator refused it as too long"


@pytest.mark.clients
async def test_codex_web_search_history_moves_to_anthropic_and_gemini_and_back(hub, tmp_path: Path):
    """The real Codex: OpenAI searches the web (Codex offers its hosted web_search tool), Codex keeps
    the web_search_call item and the cited answer, and the resumed session goes to Anthropic, then
    Gemini (the search reaches them as text, counted), then back to OpenAI (the item intact)."""
    clients = node_clis.install()
    async with serve(hub, config_with(hub)) as gateway:
        cli = node_clis.Codex(clients, tmp_path / "home", gateway.v1, "client-key-never-forwarded")
        work = tmp_path / "work"
        work.mkdir()
        hub.states["openai_responses"].push(Reply(web_search="weather in Paris", text="Paris is sunny."))
        done = await cli.run("What is the weather in Paris?", work, model="openai")
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip().endswith("Paris is sunny.")
        for n, (name, kind) in enumerate(
            (("claude", "anthropic"), ("gemini", "gemini"), ("openai", "openai_responses"))
        ):
            hub.states[kind].push(Reply(text=f"Still sunny ({n})."))
            done = await cli.run(f"And later? ({n})", work, model=name, resume_last=True)
            assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
            assert done.stdout.strip().endswith(f"Still sunny ({n}).")
            state = hub.states[kind]
            assert state.rejections == [], state.rejections
            sent = orjson.dumps(state.requests[-1].body).decode()
            if kind == "openai_responses":
                assert '"type":"web_search_call"' in sent and '"url_citation"' in sent
            else:
                assert "weather in Paris" in sent and "[web_search" in sent and "Sources:" in sent
                assert gateway.sample("gateway_repairs_total", provider=name, kind="server_tool_as_text") >= 1
