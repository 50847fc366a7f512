"""NDJSON lines for the block kinds beyond text, thinking and function calls: a refusal, and a
custom (freeform) tool's call, whose input is text."""

from __future__ import annotations

import aiohttp
import orjson
import pytest

from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec
from tests.e2e.gateway_stack import config_with, serve

NDJSON = {"Accept": "application/x-ndjson"}


@pytest.fixture
async def hub():
    async with SimulatorHub() as hub:
        yield hub


async def _lines(url: str, path: str, body: dict) -> list[dict]:
    async with aiohttp.ClientSession() as http, http.post(url + path, json=body, headers=NDJSON) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "application/x-ndjson"
        return [orjson.loads(line) for line in (await resp.read()).splitlines()]


async def test_a_refusal_has_refusal_lines(hub):
    hub.states["openai_chat"].push(Reply(refusal="I can't help with that."))
    async with serve(hub, config_with(hub)) as gateway:
        body = {
            "model": "openai-chat",
            "stream": True,
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "W", "schema": {"type": "object"}},
            },
        }
        lines = await _lines(gateway.url, "/v1/chat/completions", body)
    refusals = [line for line in lines if line["type"] == "refusal"]
    assert refusals and all(line["index"] == 0 for line in refusals)
    assert "".join(line["text"] for line in refusals) == "I can't help with that."
    assert {line["type"] for line in lines} == {"refusal", "usage", "end"} and lines[-1]["type"] == "end"


async def test_a_custom_tool_call_has_its_text_input(hub):
    patch = "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"
    hub.states["openai_responses"].push(Reply(tool_calls=[ToolCallSpec("apply_patch", {"input": patch})]))
    async with serve(hub, config_with(hub)) as gateway:
        body = {
            "model": "openai",
            "stream": True,
            "input": "add a file",
            "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files"}],
        }
        lines = await _lines(gateway.url, "/v1/responses", body)
    [call] = [line for line in lines if line["type"] == "tool_call"]
    assert call["name"] == "apply_patch" and call["input"] == patch and "arguments" not in call
    assert lines[-1]["type"] == "end" and lines[-1]["finish_reason"] == "tool_calls"
