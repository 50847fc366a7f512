"""The Vercel AI SDK's OpenAI provider (npm `@ai-sdk/openai`, pinned in tests/clients) on its
default path, `openai(model)`: the Responses API with `store: true`, whose tool loop names the
earlier answer's reasoning and text by id (`item_reference`) from step 2 on. Through the gateway
in front of every strict provider simulator, with `generateText` and `streamText`
(tests/e2e/ai_sdk_openai.mjs): the loop ends with the tool's result used, and the provider saw the
whole earlier assistant turn."""

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

SCRIPT = Path(__file__).with_name("ai_sdk_openai.mjs")
TOOL = SCRIPT.with_name("ai_sdk_weather.mjs")  # the tool it imports
FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
SAID = "Let me look that up."
THOUGHT = "The user wants the weather."
# families whose demo target returns readable reasoning (kept, and replayed to them)
REASONING = {"anthropic", "openai_responses", "gemini", "mistral", "kimi", "deepseek"}
# families whose simulator verifies a replayed continuity token (signature / encrypted reasoning)
VERIFIES = {"anthropic", "openai_responses", "gemini"}


@pytest.fixture(scope="module")
def clients() -> Clients:
    return install()


@pytest.mark.parametrize("mode", ["generate", "stream"])
@pytest.mark.parametrize("name,kind", FAMILY)
async def test_default_openai_provider_tool_loop(clients, tmp_path, name, kind, mode):
    script = tmp_path / SCRIPT.name
    for source in (SCRIPT, TOOL):
        shutil.copyfile(source, tmp_path / source.name)
    (tmp_path / "node_modules").symlink_to(clients.root / "node_modules")  # the pinned packages
    async with running_stack() as stack:
        state = stack.hub.states[kind]
        state.push(
            Reply(
                text=SAID,
                reasoning=THOUGHT,
                tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})],
                chunk_size=5,
            ),
            Reply(text="It is sunny in Paris.", chunk_size=5),
        )
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "NO_PROXY": "127.0.0.1"}
        async with asyncio.timeout(60):
            finished = await run_cli(
                [shutil.which("node") or "node", str(script), name, f"{stack.url}/v1", mode], env, tmp_path
            )
        assert finished.returncode == 0, finished.stdout + finished.stderr
        result = orjson.loads(finished.stdout.strip().splitlines()[-1])
        assert result["calls"] == [["get_weather", {"city": "Paris"}]]
        assert result["results"] == ["sunny in Paris"]
        assert result["steps"] == 2 and result["text"].endswith("It is sunny in Paris.")
        assert result["finish"] == "stop"
        assert state.rejections == []
        assert len(state.requests) == 2
        # step 2 named the earlier reasoning and text by id: the provider got them back, with the
        # call and the tool's result
        second = orjson.dumps(state.requests[1].body).decode()
        assert SAID in second and "sunny in Paris" in second and "Paris" in second
        assert second.index(SAID) < second.index("sunny in Paris")
        assert (THOUGHT in second) == (kind in REASONING)
        if kind in VERIFIES:  # the issuer got its own continuity token back, and checked it
            assert state.verified_tokens >= 1
