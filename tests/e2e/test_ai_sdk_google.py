"""The Vercel AI SDK's Google provider (npm `@ai-sdk/google`, pinned in tests/clients) against
the gateway's Gemini API, in front of every strict provider simulator: a tool loop through
`generateText` and a `streamText` answer (tests/e2e/ai_sdk_google.mjs)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import orjson
import pytest

from gateway.demo import FAMILIES
from gateway.simulators.base import Reply, ToolCallSpec
from tests.clients.node_clis import Clients, install, run_cli
from tests.ops.conftest import running_stack

pytestmark = pytest.mark.clients

SCRIPT = Path(__file__).with_name("ai_sdk_google.mjs")
TOOL = SCRIPT.with_name("ai_sdk_weather.mjs")  # the tool it imports
FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]


@pytest.fixture(scope="module")
def clients() -> Clients:
    return install()


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_tool_loop_and_stream(clients, tmp_path, name, kind):
    script = tmp_path / SCRIPT.name
    for source in (SCRIPT, TOOL):
        shutil.copyfile(source, tmp_path / source.name)
    (tmp_path / "node_modules").symlink_to(clients.root / "node_modules")  # the pinned packages
    async with running_stack() as stack:
        stack.hub.states[kind].push(
            Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]),
            Reply(text="It is sunny in Paris."),
            Reply(text="A streamed answer.", chunk_size=4),
        )
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "NO_PROXY": "127.0.0.1"}
        async with asyncio.timeout(60):
            finished = await run_cli(
                [shutil.which("node") or "node", str(script), name, f"{stack.url}/v1beta"], env, tmp_path
            )
        assert finished.returncode == 0, finished.stdout + finished.stderr
        result = orjson.loads(finished.stdout.strip().splitlines()[-1])
        assert result["calls"] == [["get_weather", {"city": "Paris"}]]
        assert result["steps"] == 2 and result["text"] == "It is sunny in Paris."
        assert result["finish"] == "stop"
        assert result["streamed"] == "A streamed answer." and result["streamFinish"] == "stop"
        assert stack.hub.states[kind].rejections == []
        second = orjson.dumps(stack.hub.states[kind].requests[1].body).decode()
        assert "sunny in Paris" in second
