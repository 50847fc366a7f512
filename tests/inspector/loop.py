"""A gateway on the simulators for the inspector tests, and a Claude -> Gemini -> Mistral tool
loop through its Messages endpoint, as Claude Code runs one: each turn's answer goes back as it
came (thinking with its signature, tool_use), then the tool's result, and the next turn asks
another family."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec
from tests.e2e.ndjson_client import Running, serving
from tests.e2e.scenarios import scenario_config

FAMILIES = (("claude", "anthropic"), ("gemini", "gemini"), ("mistral", "mistral"))
THINKING = {"claude": "Claude considers the weather.", "gemini": "Gemini plans the next call.", "mistral": ""}
THINK = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


@dataclass
class Loop:
    messages: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # X-Gateway-Request-Id of each turn
    answers: list[dict[str, Any]] = field(default_factory=list)


def script(hub: SimulatorHub) -> None:
    """Claude and Gemini think and call the tool; Mistral answers."""
    hub.states["anthropic"].push(
        Reply(reasoning=THINKING["claude"], tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})])
    )
    hub.states["gemini"].push(
        Reply(reasoning=THINKING["gemini"], tool_calls=[ToolCallSpec("get_weather", {"city": "Lyon"})])
    )
    hub.states["mistral"].push(Reply(text="Sunny in Paris and Lyon."))


async def run_loop(url: str, headers: dict[str, str] | None = None) -> Loop:
    loop = Loop([{"role": "user", "content": "What is the weather in Paris and Lyon?"}])
    async with aiohttp.ClientSession(headers=headers) as session:
        for model, _ in FAMILIES:
            body = {"model": model, "max_tokens": 4096, "messages": loop.messages, "tools": TOOLS, **THINK}
            async with session.post(f"{url}/v1/messages", json=body) as response:
                answer = await response.json()
                assert response.status == 200, answer
                loop.ids.append(response.headers["X-Gateway-Request-Id"])
            loop.answers.append(answer)
            loop.messages = [*loop.messages, {"role": "assistant", "content": answer["content"]}]
            calls = [b for b in answer["content"] if b["type"] == "tool_use"]
            if calls:
                results = [{"type": "tool_result", "tool_use_id": c["id"], "content": "sunny"} for c in calls]
                loop.messages.append({"role": "user", "content": results})
    return loop


SECRET_ENV = "INSPECTOR_TEST_CONTINUITY_SECRET"


@asynccontextmanager
async def inspector_gateway(
    hub: SimulatorHub, tokens: dict[str, str] | None = None, **inspector: Any
) -> AsyncIterator[Running]:
    """A gateway on the hub (a model group per family, memory store); `tokens`: env name ->
    client token, for [auth]; `inspector`: the [inspector] section."""
    raw = scenario_config(hub, {"backend": "memory"})
    raw["server"]["continuity_secret_env"] = SECRET_ENV
    raw["inspector"] = inspector
    env = {DEMO_KEY_ENV: hub.states["anthropic"].api_key, SECRET_ENV: "inspector-test-secret"}
    if tokens:
        raw["auth"] = {"tokens_env": list(tokens)}
        env.update(tokens)
    async with serving(config_from_dict(raw, source="<inspector test>"), env) as running:
        yield running
