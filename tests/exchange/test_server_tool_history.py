"""Claude Code's server-tool history (web search with encrypted results, cited text) through the
Messages dialect: replayed intact to Anthropic, counted text for every other family, and never a
5xx or a mark against a target's health (it was once `502 unsupported Anthropic content block type
'server_tool_use'`)."""

from __future__ import annotations

import orjson
import pytest

from gateway.demo import FAMILIES
from gateway.simulators.anthropic_rules import search_result_content
from gateway.simulators.base import Reply
from tests.ops.conftest import running_stack

HEADERS = {"anthropic-version": "2023-06-01"}
URL = "https://weather.example/paris"


def history(content: str) -> list[dict]:
    page = {"type": "web_search_result", "url": URL, "title": "Paris weather", "encrypted_content": content}
    cite = {
        "type": "web_search_result_location",
        "url": URL,
        "title": "Paris weather",
        "cited_text": "sunny all day",
        "encrypted_index": "EiQK",
    }
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01",
                    "name": "web_search",
                    "input": {"query": "paris weather"},
                },
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [page]},
                {"type": "text", "text": "It is sunny.", "citations": [cite]},
            ],
        },
        {"role": "user", "content": "And tomorrow?"},
    ]


@pytest.mark.parametrize(("family", "kind"), [(name, kind) for name, kind, _, _ in FAMILIES])
async def test_server_tool_history_reaches_every_family(family, kind):
    async with running_stack() as stack:
        state = stack.hub.states[kind]
        content = search_result_content(stack.hub.states["anthropic"], URL)
        body = {"model": family, "max_tokens": 512, "messages": history(content)}
        for _ in range(3):  # again and again: the target stays healthy
            state.push(Reply(text="Sunny again."))
            status, headers, payload = await stack.chat(body, HEADERS, path="/v1/messages")
            assert status == 200, payload
        assert state.rejections == []
        sent = orjson.dumps(state.requests[-1].body).decode()
        if kind == "anthropic":
            assert '"server_tool_use"' in sent and content in sent and "encrypted_index" in sent
            assert (
                "X-Gateway-Repairs" not in headers
                or "server_tool_as_text" not in headers["X-Gateway-Repairs"]
            )
        else:
            assert "srvtoolu_01" not in sent and content not in sent
            assert "paris weather" in sent and URL in sent and "sunny all day" in sent
            assert "server_tool_as_text=2" in headers["X-Gateway-Repairs"]
            assert "citations_as_text=1" in headers["X-Gateway-Repairs"]
        assert stack.state.engine.health.available(stack.state.engine.router.plan(family).targets[0])
