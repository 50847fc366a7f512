"""What a UI does with the NDJSON event stream, written the way the README tells one to: read the
lines, fold them into blocks by `index`, and send the turn back as a chat assistant message.
Also a gateway on the simulators whose continuity secret is shared between instances (so a
fresh gateway with an empty store can take the next turn of a stateless UI)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from gateway.app import create_app
from gateway.config import GatewayConfig, config_from_dict
from gateway.demo import DEMO_KEY_ENV
from gateway.metrics import Metrics
from gateway.simulators.base import SimulatorHub
from gateway.state import GatewayState
from tests.e2e.scenarios import scenario_config

SECRET_ENV = "NDJSON_TEST_CONTINUITY_SECRET"
TOKEN_ENV = "NDJSON_TEST_GATEWAY_TOKEN"
NDJSON = {"Accept": "application/x-ndjson"}


@dataclass
class Running:
    url: str
    state: GatewayState


@asynccontextmanager
async def ndjson_gateway(
    hub: SimulatorHub, secret: str = "shared-continuity-secret", token: str | None = None
) -> AsyncIterator[Running]:
    """A gateway on the hub (a model group per provider entry, memory store) with `secret` as
    its continuity secret; clients must send `token` when one is given."""
    raw = scenario_config(hub, {"backend": "memory"})
    raw["server"]["continuity_secret_env"] = SECRET_ENV
    env = {DEMO_KEY_ENV: hub.states["anthropic"].api_key, SECRET_ENV: secret}
    if token is not None:
        raw["auth"] = {"tokens_env": [TOKEN_ENV]}
        env[TOKEN_ENV] = token
    async with serving(config_from_dict(raw, source="<ndjson test>"), env) as running:
        yield running


@asynccontextmanager
async def serving(config: GatewayConfig, env: dict[str, str]) -> AsyncIterator[Running]:
    """The gateway of `config` on its loopback port until the block ends."""
    app = create_app(config, env, Metrics())
    runner = web.AppRunner(app, handle_signals=False, access_log=None, handler_cancellation=True)
    await runner.setup()
    try:
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        yield Running(f"http://{config.server.host}:{config.server.port}", app[GatewayState.KEY])
    finally:
        await runner.cleanup()


@dataclass
class Streamed:
    status: int
    headers: Any
    lines: list[dict[str, Any]]
    raw: bytes  # the body as sent (every line ends with a newline)


async def post_ndjson(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> Streamed:
    async with session.post(f"{url}/v1/chat/completions", json=body, headers=NDJSON) as resp:
        raw = await resp.read()
        lines = [json.loads(line) for line in raw.split(b"\n") if line] if resp.status == 200 else []
        return Streamed(resp.status, resp.headers, lines, raw)


def fold(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The UI's blocks, by index: {"type": "text"|"thinking", "text"} or {"type": "tool_call",
    "id", "name", "arguments"}, each with the "signature" that completed it, if any."""
    blocks: dict[int, dict[str, Any]] = {}
    for line in lines:
        kind = line["type"]
        if kind in ("text", "thinking"):
            block = blocks.setdefault(line["index"], {"type": kind, "text": ""})
            assert block["type"] == kind, f"block {line['index']} changed kind"
            block["text"] += line["text"]
        elif kind == "tool_call":
            assert line["index"] not in blocks, "a tool call is one line"
            blocks[line["index"]] = {k: line[k] for k in ("type", "id", "name", "arguments")}
        elif kind == "thinking_signature":
            blocks[line["index"]]["signature"] = line["signature"]  # its block was named first
    assert sorted(blocks) == list(range(len(blocks))), "indexes are the positions 0..n-1"
    return [blocks[i] for i in range(len(blocks))]


def chat_history(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The turn as a Chat Completions assistant message, as the README documents it."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(b["text"] for b in blocks if b["type"] == "text") or None,
    }
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b["arguments"])},
        }
        for b in blocks
        if b["type"] == "tool_call"
    ]
    if calls:
        message["tool_calls"] = calls
    details = []
    for index, b in enumerate(blocks):
        if b["type"] == "thinking":
            entry = {"type": "reasoning.text", "text": b["text"], "index": index}
            if "signature" in b:
                entry["signature"] = b["signature"]
            details.append(entry)
        elif "signature" in b:
            call_id = b["id"] if b["type"] == "tool_call" else None
            details.append(
                {"type": "reasoning.encrypted", "data": b["signature"], "index": index, "id": call_id}
            )
    if details:
        message["reasoning_details"] = details
    return message


def first_seen(lines: list[dict[str, Any]]) -> list[int]:
    """Block indexes in the order their first line came."""
    return list(dict.fromkeys(line["index"] for line in lines if "index" in line))
