"""The real Claude Code CLI (npm `@anthropic-ai/claude-code`, pinned in tests/clients) with
`ANTHROPIC_BASE_URL` at the gateway, in front of every strict provider simulator.

Each simulated model is scripted to call Claude Code's own Bash tool with a harmless `echo`, then
to answer: the task is done only when the command really ran in the working directory and its
output went back through the gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.config import StoreConfig, load_config
from gateway.demo import FAMILIES
from gateway.metrics import Metrics
from gateway.simulators.base import Fault, Reply, SimulatorHub, ToolCallSpec, free_port
from tests.clients.node_clis import ClaudeCode, Clients, Finished, install
from tests.e2e.scenarios import shell_task
from tests.metric_reads import repairs_counted, requests_counted
from tests.ops.conftest import Stack, running_stack

pytestmark = pytest.mark.clients

KIND = {name: kind for name, kind, _, _ in FAMILIES}
ORDER = ("claude", "openai", "gemini", "openai-chat", "mistral", "kimi", "deepseek")
RUN_LIMIT = 120  # seconds for one invocation: a hang fails the test instead of the suite


@pytest.fixture(scope="module")
def clients() -> Clients:
    return install()


async def run(cli: ClaudeCode, prompt: str, cwd: Path, **options: Any) -> Finished:
    async with asyncio.timeout(RUN_LIMIT):
        return await cli.run(prompt, cwd, **options)


def assert_done(finished: Finished, cwd: Path, n: int) -> dict[str, Any]:
    assert finished.returncode == 0, finished.stdout + finished.stderr
    result = finished.json()
    assert result["is_error"] is False, result
    assert result["result"] == f"The file out{n}.txt now contains: hi{n}"
    assert result["num_turns"] == 2  # the tool call, then the answer after its result
    assert (cwd / f"out{n}.txt").read_text() == f"hi{n}\n", "Claude Code ran the Bash tool"
    return result


@asynccontextmanager
async def claude_code(
    clients: Clients, tmp_path: Path, adjust: Callable[[dict[str, Any]], None] | None = None, **cli: Any
) -> AsyncIterator[tuple[Stack, ClaudeCode, Path]]:
    async with running_stack(adjust) as stack:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        options = {"api_key": "any-key-the-gateway-does-not-check", **cli}
        yield stack, ClaudeCode(clients, tmp_path / "home", stack.url, **options), work


def tool_results(body: dict[str, Any]) -> list[str]:
    return [
        b["content"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


@pytest.mark.parametrize("family", ORDER)
async def test_claude_code_runs_its_bash_tool_through_every_family(clients, tmp_path, family):
    async with claude_code(clients, tmp_path) as (stack, cli, work):
        finished = await run(cli, shell_task(stack.hub, family, "Bash", 0), work, model=family)
        assert_done(finished, work, 0)
        state = stack.hub.states[KIND[family]]
        assert state.rejections == []
        assert len(state.requests) == 2, "no fallback ladder: the first request was accepted"
        assert state.script == type(state.script)(), "both scripted turns were used"
        # the command's output reached the model as the tool result of the second request
        second = orjson.dumps(state.requests[1].body).decode()
        assert "hi0" in second and "Bash" in second
        ok = requests_counted(stack.metrics, "anthropic_messages", family, family, "ok")
        assert ok == 2


async def test_one_continued_session_visits_every_family_and_returns_to_anthropic(clients, tmp_path):
    """`claude -c` carries the whole history each time: thinking signed by Anthropic, reasoning
    sealed by the gateway for the others, tool ids of every family. Back at Anthropic its own
    signatures verify and nothing is rejected anywhere."""
    async with claude_code(clients, tmp_path) as (stack, cli, work):
        for n, family in enumerate((*ORDER, "claude")):
            prompt = shell_task(stack.hub, family, "Bash", n)
            finished = await run(cli, prompt, work, model=family, continue_session=n > 0)
            result = assert_done(finished, work, n)
            if n == 0:
                session = result["session_id"]
            assert result["session_id"] == session, "one session, continued"

        for kind in {KIND[f] for f in ORDER}:
            assert stack.hub.states[kind].rejections == [], kind
        anthropic = stack.hub.states["anthropic"]
        assert len(anthropic.requests) == 4
        last = anthropic.requests[-1].body
        assistant = [m for m in last["messages"] if m["role"] == "assistant"]
        assert len(assistant) == 2 * (len(ORDER) + 1) - 1, "the whole history came back"
        # every earlier Bash output went back as a tool result, across all families
        results = " ".join(tool_results(last))
        assert all(f"hi{n}" in results for n in range(len(ORDER) + 1))
        # Anthropic's own thinking (turn 1 and this turn) replayed and verified; no foreign token
        signed = [b for m in assistant for b in m["content"] if b["type"] == "thinking"]
        assert len(signed) == 2 and anthropic.verified_tokens >= 2
        assert all(not b["signature"].startswith("gw1.") for b in signed)


async def test_claude_codes_own_model_names_route_to_any_family(clients, tmp_path):
    """With a model name Claude Code knows it sends budgeted thinking, tool search
    (`defer_loading`, the advanced-tool-use beta) and context management: the gateway serves
    it on Gemini, and keeps those Anthropic-only options to itself (counted)."""

    def alias(data: dict[str, Any]) -> None:
        data["models"]["claude-sonnet-4-5"] = data["models"]["gemini"]

    async with claude_code(clients, tmp_path, alias) as (stack, cli, work):
        finished = await run(cli, shell_task(stack.hub, "gemini", "Bash", 0), work, model="claude-sonnet-4-5")
        assert_done(finished, work, 0)
        gemini = stack.hub.states["gemini"]
        assert gemini.rejections == [] and len(gemini.requests) == 2
        sent = orjson.dumps(gemini.requests[0].body).decode()
        assert "defer_loading" not in sent and "context_management" not in sent
        dropped = repairs_counted(stack.metrics, "gemini", "provider_option_dropped")
        assert dropped >= 2


async def test_bearer_and_api_key_credentials_against_an_authenticating_gateway(clients, tmp_path):
    def auth(data: dict[str, Any]) -> None:
        data["auth"] = {"tokens_env": ["GATEWAY_TOKEN"]}

    token = "gw-token-for-claude-code"
    async with running_stack(auth, env={"GATEWAY_TOKEN": token}) as stack:
        work = tmp_path / "work"
        work.mkdir()
        for n, how in enumerate(("x-api-key", "bearer")):
            cli = ClaudeCode(clients, tmp_path / f"home-{how}", stack.url, token, auth=how)
            finished = await run(
                cli, shell_task(stack.hub, "openai-chat", "Bash", n), work, model="openai-chat"
            )
            assert_done(finished, work, n)
        sent = [r.headers for r in stack.hub.states["openai_chat"].requests]
        assert len(sent) == 4 and not any(token in str(dict(h)) for h in sent), "never forwarded"
        # (a wrong token is a 401 in Anthropic's envelope, tests/e2e/test_anthropic_sdk.py; Claude
        # Code keeps retrying a 401 with backoff, so it is not driven here)


async def test_a_stream_broken_after_the_first_token_ends_with_an_error_event(clients, tmp_path):
    """Mid-stream `event: error` (overloaded): Claude Code asks again without streaming and gets
    the Message JSON."""
    async with claude_code(clients, tmp_path) as (stack, cli, work):
        prompt = shell_task(stack.hub, "mistral", "Bash", 0)
        mistral = stack.hub.states["mistral"]
        tool_turn = mistral.script.popleft()
        mistral.script.appendleft(tool_turn)
        mistral.script.appendleft(
            Fault(after_events=2, reply=Reply(text="Let me think about this at length."))
        )
        finished = await run(cli, prompt, work, model="mistral")
        assert_done(finished, work, 0)
        streamed = [bool(r.body.get("stream")) for r in mistral.requests]
        assert streamed == [True, False, True], "the retry after the error event was not streamed"
        assert (
            requests_counted(stack.metrics, "anthropic_messages", "mistral", "mistral", "stream_error") == 1
        )


EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "claude-code.toml"


async def test_the_shipped_claude_code_config_routes_its_model_names(clients, tmp_path):
    """config/examples/claude-code.toml, pointed at the simulators: Claude Code's own model name
    reaches Claude, a family name reaches that family, in one continued session."""
    async with SimulatorHub() as hub:
        env = {"GATEWAY_SIMULATORS_URL": f"http://{hub.host}:{hub.port}"}
        config = load_config(EXAMPLE, port=free_port(), env=env)
        config = config.model_copy(update={"store": StoreConfig()})  # memory: nothing on disk
        keys = {p.api_key_env: hub.states[p.kind].api_key for p in config.providers.values()}
        runner = web.AppRunner(create_app(config, keys, Metrics()), handle_signals=False, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        try:
            work = tmp_path / "work"
            work.mkdir()
            cli = ClaudeCode(
                clients, tmp_path / "home", f"http://{config.server.host}:{config.server.port}", "x"
            )
            routes = (
                ("claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"),
                ("gemini", "gemini", "gemini-3-pro"),
            )
            for n, (model, kind, upstream) in enumerate(routes):
                state = hub.states[kind]
                state.push(
                    Reply(
                        reasoning="Shell.",
                        tool_calls=[
                            ToolCallSpec("Bash", {"command": f"echo hi{n} > out{n}.txt && cat out{n}.txt"})
                        ],
                    ),
                    Reply(text=f"The file out{n}.txt now contains: hi{n}"),
                )
                prompt = f"Create a file named out{n}.txt containing hi{n}, then show it."
                assert_done(await run(cli, prompt, work, model=model, continue_session=n > 0), work, n)
                assert state.rejections == [] and len(state.requests) == 2
                assert upstream in state.requests[0].path + str(state.requests[0].body.get("model"))
        finally:
            await runner.cleanup()


def streamed_block_types(finished: Finished) -> set[str]:
    """The content block types of the assistant messages Claude Code printed (stream-json)."""
    types: set[str] = set()
    for line in finished.stdout.splitlines():
        event = orjson.loads(line) if line.startswith("{") else {}
        if event.get("type") == "assistant":
            types.update(block["type"] for block in event["message"]["content"])
    return types


# families whose demo model gives readable reasoning (the demo's openai-chat model gives none)
REASONS = {"claude", "openai", "gemini", "mistral", "kimi", "deepseek"}


@pytest.mark.parametrize("thinking", [False, None])
@pytest.mark.parametrize("family", ORDER)
async def test_claude_code_thinking_off_and_on_is_what_each_family_gets_and_shows(
    clients, tmp_path, family, thinking
):
    """Claude Code under its own model name asks for thinking (or, with MAX_THINKING_TOKENS=0,
    turns it off): the family gets exactly that in its own parameters, and thinking appears in
    Claude Code's transcript only when it asked for it, though deepseek-reasoner always reasons."""

    def alias(data: dict[str, Any]) -> None:
        data["models"]["claude-sonnet-4-5"] = data["models"][family]

    async with claude_code(clients, tmp_path, alias, thinking=thinking) as (stack, cli, work):
        prompt = shell_task(stack.hub, family, "Bash", 0)
        finished = await run(cli, prompt, work, model="claude-sonnet-4-5", output_format="stream-json")
        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert (work / "out0.txt").read_text() == "hi0\n"
        state = stack.hub.states[KIND[family]]
        assert state.rejections == [] and len(state.requests) == 2
        body = state.requests[0].body
        shown = "thinking" in streamed_block_types(finished)
        if family == "claude":
            assert ("thinking" in body) is (thinking is None)
        elif family == "gemini":
            config = body["generationConfig"]["thinkingConfig"]
            assert config.get("includeThoughts", False) is (thinking is None)
        elif family == "deepseek":
            assert "thinking" not in body and "reasoning_effort" not in body  # no switch on the reasoner
        # every family: thinking in Claude Code's transcript exactly when it asked for it (and the
        # model reasons), whatever the family's own switch is (the simulator accepted it above)
        assert shown is (thinking is None and family in REASONS)
