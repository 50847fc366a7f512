"""Building blocks of the cross-provider scenarios: a stack with pair-wise model groups, a
field-stripping client (keeps only standard OpenAI fields, like most SDK-based agents), and the
scripted model side."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import openai
from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV, FAMILIES, TOOLS
from gateway.metrics import Metrics
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec, free_port
from tests.sdk_timeout import SDK_TIMEOUT

KIND = {name: kind for name, kind, _, _ in FAMILIES}
NAMES = [name for name, _, _, _ in FAMILIES]
# families whose simulator verifies replayed continuity tokens
SIGNING = {"anthropic", "openai_responses", "gemini"}


def scenario_config(hub: SimulatorHub, store: dict[str, Any], port: int | None = None) -> dict[str, Any]:
    providers = {
        name: {"kind": kind, "base_url": hub.base_url(kind), "api_key_env": DEMO_KEY_ENV}
        for name, kind, _, _ in FAMILIES
    }
    target = {name: {"provider": name, "model": model, **options} for name, _, model, options in FAMILIES}
    models: dict[str, Any] = {name: {"targets": [target[name]]} for name in NAMES}
    for a in NAMES:
        for b in NAMES:
            if a != b:
                models[f"rr.{a}.{b}"] = {"strategy": "round_robin", "targets": [target[a], target[b]]}
                models[f"fo.{a}.{b}"] = {"strategy": "failover", "targets": [target[a], target[b]]}
    return {
        "server": {"host": "127.0.0.1", "port": port or free_port()},
        "store": store,
        "providers": providers,
        "models": models,
    }


class Gateway:
    def __init__(self, hub: SimulatorHub, store: dict[str, Any], port: int | None = None) -> None:
        self.hub = hub
        self.config = config_from_dict(scenario_config(hub, store, port), source="<scenario>")
        self.metrics = Metrics()
        self.runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.server.host}:{self.config.server.port}"

    async def start(self) -> Gateway:
        app = create_app(self.config, {DEMO_KEY_ENV: self.hub.states["anthropic"].api_key}, self.metrics)
        self.runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True)
        await self.runner.setup()
        await web.TCPSite(self.runner, self.config.server.host, self.config.server.port).start()
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=SDK_TIMEOUT
        )


@asynccontextmanager
async def running(
    hub: SimulatorHub, store: dict[str, Any], port: int | None = None
) -> AsyncIterator[Gateway]:
    gateway = await Gateway(hub, store, port).start()
    try:
        yield gateway
    finally:
        await gateway.stop()


def strip(message: Any) -> dict[str, Any]:
    """What a client that knows only standard OpenAI fields sends back."""
    out: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in message.tool_calls
        ]
    return out


RESULTS = {
    "Paris": "sunny, 21C",
    "Tokyo": "rain, 17C",
    "Lima": "fog, 15C",
    "Oslo": "snow, -2C",
    "Rome": "clear, 25C",
}


def answer_calls(message: dict[str, Any], only: set[int] | None = None) -> list[dict[str, Any]]:
    """Tool messages answering the calls (all of them, or only the given positions)."""
    out = []
    for i, call in enumerate(message.get("tool_calls", ())):
        if only is not None and i not in only:
            continue
        city = json.loads(call["function"]["arguments"]).get("city", "?")
        out.append({"role": "tool", "tool_call_id": call["id"], "content": RESULTS.get(city, "unknown")})
    return out


def calls_reply(*cities: str, reasoning: str = "I need the weather first.") -> Reply:
    return Reply(
        reasoning=reasoning, text="", tool_calls=[ToolCallSpec("get_weather", {"city": c}) for c in cities]
    )


def text_reply(text: str = "Here is the weather summary you asked for.", reasoning: str = "Done.") -> Reply:
    return Reply(reasoning=reasoning, text=text)


async def turn(client: openai.AsyncOpenAI, model: str, messages: list[dict[str, Any]], stream: bool = False):
    """One chat turn; returns (stripped message, finish reason, raw headers)."""
    if not stream:
        raw = await client.chat.completions.with_raw_response.create(
            model=model, messages=messages, tools=TOOLS
        )
        completion = raw.parse()
        choice = completion.choices[0]
        return strip(choice.message), choice.finish_reason, raw.headers
    async with client.chat.completions.with_streaming_response.create(
        model=model, messages=messages, tools=TOOLS, stream=True
    ) as raw:
        content, calls, finish = [], {}, None
        async for chunk in await raw.parse():
            for choice in chunk.choices:
                content.append(choice.delta.content or "")
                for part in choice.delta.tool_calls or ():
                    slot = calls.setdefault(
                        part.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                    slot["id"] = part.id or slot["id"]
                    if part.function:
                        slot["function"]["name"] += part.function.name or ""
                        slot["function"]["arguments"] += part.function.arguments or ""
                finish = choice.finish_reason or finish
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return message, finish, raw.headers


def shell_task(hub: SimulatorHub, family: str, tool: str, n: int) -> str:
    """Script `family`'s model for a real agent app: call the app's own shell tool (`tool`:
    Claude Code's Bash, Gemini CLI's and qwen-code's run_shell_command, opencode's bash) to write
    and show out{n}.txt, then report it. Returns the prompt to give the app."""
    hub.states[KIND[family]].push(
        Reply(
            reasoning=f"I will write the file with a shell command ({n}).",
            tool_calls=[
                ToolCallSpec(
                    tool,
                    {
                        "command": f"echo hi{n} > out{n}.txt && cat out{n}.txt",
                        "description": "Write the file",
                    },
                )
            ],
        ),
        Reply(text=f"The file out{n}.txt now contains: hi{n}"),
    )
    return f"Create a file named out{n}.txt containing hi{n}, then show it."
