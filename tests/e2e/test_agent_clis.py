"""More real agent apps through the gateway, in front of every strict provider simulator:
qwen-code (`qwen -p`, sessions with `-c`) and opencode (`opencode run`, sessions with `-c`) on
the Chat Completions endpoint, each running its own shell tool; aider (`--model openai/<group>`)
making a whole-file edit. Installed pinned on first use (tests/clients/agent_clis.py).

A task is done only when the command really ran (or the edit really landed) in the working
directory and the answer went back through the gateway with no rejection anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest

from gateway.demo import FAMILIES
from gateway.simulators.base import Reply
from tests.clients.agent_clis import Agents, Aider, OpenCode, QwenCode, install_agents, install_aider
from tests.clients.node_clis import Finished
from tests.e2e.scenarios import shell_task
from tests.ops.conftest import Stack, running_stack

pytestmark = pytest.mark.clients

KIND = {name: kind for name, kind, _, _ in FAMILIES}
ORDER = ("claude", "openai", "gemini", "openai-chat", "mistral", "kimi", "deepseek")
RUN_LIMIT = 150  # seconds for one invocation: a hang fails the test instead of the suite
KEY = "any-key-the-gateway-does-not-check"


@pytest.fixture(scope="module")
def agents() -> Agents:
    return install_agents()


@pytest.fixture(scope="module")
def aider() -> Path:
    return install_aider()


@asynccontextmanager
async def stack_and_dirs(tmp_path: Path) -> AsyncIterator[tuple[Stack, Path, Path]]:
    async with running_stack() as stack:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        yield stack, tmp_path / "home", work


async def limited(run) -> Finished:
    async with asyncio.timeout(RUN_LIMIT):
        return await run


def assert_clean(stack: Stack) -> None:
    for kind, state in stack.hub.states.items():
        assert state.rejections == [], kind


def last_tool_result_went_up(stack: Stack, family: str, n: int) -> None:
    body = orjson.dumps(stack.hub.states[KIND[family]].requests[-1].body).decode()
    assert f"hi{n}" in body, "the command's output reached the model as a tool result"


# ---------------------------------------------------------------------------- qwen-code


def assert_qwen_done(finished: Finished, cwd: Path, n: int) -> str:
    assert finished.returncode == 0, finished.stdout + finished.stderr
    events = orjson.loads(finished.stdout)
    result = next(e for e in events if e.get("type") == "result")
    assert result["is_error"] is False, result
    assert result["result"] == f"The file out{n}.txt now contains: hi{n}"
    assert (cwd / f"out{n}.txt").read_text() == f"hi{n}\n", "qwen-code ran its shell tool"
    return result["session_id"]


async def test_one_qwen_code_session_runs_its_shell_tool_on_every_family_and_returns(agents, tmp_path):
    """One shell-tool task per family, each continuing the session (`qwen -c` sends the whole
    history each time: tool ids and reasoning of every family), and back to the first."""
    async with stack_and_dirs(tmp_path) as (stack, home, work):
        cli = QwenCode(agents, home, f"{stack.url}/v1", KEY)
        sessions = set()
        for n, family in enumerate((*ORDER, "claude")):
            prompt = shell_task(stack.hub, family, "run_shell_command", n)
            finished = await limited(cli.run(prompt, work, family, continue_session=n > 0))
            sessions.add(assert_qwen_done(finished, work, n))
            last_tool_result_went_up(stack, family, n)
        assert len(sessions) == 1, "one session, continued"
        assert_clean(stack)
        last = orjson.dumps(stack.hub.states["anthropic"].requests[-1].body).decode()
        assert all(f"hi{n}" in last for n in range(len(ORDER) + 1)), "the whole history came back"


# ---------------------------------------------------------------------------- opencode


def assert_opencode_done(finished: Finished, cwd: Path, n: int) -> None:
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert f"The file out{n}.txt now contains: hi{n}" in finished.stdout
    assert (cwd / f"out{n}.txt").read_text() == f"hi{n}\n", "opencode ran its bash tool"


def small_model(family: str) -> str:
    return "openai-chat" if family != "openai-chat" else "mistral"


async def test_one_opencode_session_runs_its_bash_tool_on_every_family_and_returns(agents, tmp_path):
    """One bash-tool task per family, each continuing the session (`opencode run -c`)."""
    async with stack_and_dirs(tmp_path) as (stack, home, work):
        cli = OpenCode(agents, home, f"{stack.url}/v1", KEY, groups=ORDER)
        for n, family in enumerate((*ORDER, "claude")):
            prompt = shell_task(stack.hub, family, "bash", n)
            finished = await limited(
                cli.run(prompt, work, family, small_model(family), continue_session=n > 0)
            )
            assert_opencode_done(finished, work, n)
            last_tool_result_went_up(stack, family, n)
        assert_clean(stack)
        last = orjson.dumps(stack.hub.states["anthropic"].requests[-1].body).decode()
        assert all(f"hi{n}" in last for n in range(len(ORDER) + 1)), "the whole history came back"


# ---------------------------------------------------------------------------- aider


@pytest.mark.parametrize("family", ORDER)
async def test_aider_makes_a_whole_file_edit_through_every_family(aider, tmp_path, family):
    async with stack_and_dirs(tmp_path) as (stack, home, work):
        (work / "greeting.txt").write_text("hello\n")
        stack.hub.states[KIND[family]].push(
            Reply(text="greeting.txt\n```\nhello, world\n```\n", reasoning="Rewrite the greeting.")
        )
        cli = Aider(aider, home, f"{stack.url}/v1", KEY)
        finished = await limited(
            cli.run("Make the greeting say hello, world", work, family, ["greeting.txt"])
        )
        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert (work / "greeting.txt").read_text() == "hello, world\n", finished.stdout + finished.stderr
        assert_clean(stack)
        sent = orjson.dumps(stack.hub.states[KIND[family]].requests[-1].body).decode()
        assert "greeting.txt" in sent and "hello" in sent, "aider sent the file's content"
