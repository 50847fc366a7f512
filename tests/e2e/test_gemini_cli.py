"""The real Gemini CLI (npm `@google/gemini-cli`, pinned in tests/clients) with
`GOOGLE_GEMINI_BASE_URL` at the gateway, in front of every strict provider simulator.

Each simulated model is scripted to call Gemini CLI's own shell tool with a harmless `echo`,
then to answer: the task is done only when the command really ran in the working directory and
its output went back through the gateway. The model names Gemini CLI asks for are groups of the
gateway's config, each routed to the family under test (config/examples/gemini-cli.toml does the
same for real providers).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
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
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec, free_port
from tests.clients.node_clis import Clients, Finished, GeminiCli, install
from tests.e2e.scenarios import shell_task
from tests.ops.conftest import Stack, running_stack

pytestmark = pytest.mark.clients

KIND = {name: kind for name, kind, _, _ in FAMILIES}
TARGET = {name: {"provider": name, "model": model, **options} for name, _, model, options in FAMILIES}
ORDER = ("gemini", "claude", "openai", "openai-chat", "mistral", "kimi", "deepseek")
RUN_LIMIT = 120  # seconds for one invocation: a hang fails the test instead of the suite
# a group per family, named `via-<family>`: the session test moves between them with `-m`
VIA = {f"via-{name}": {"targets": [TARGET[name]]} for name in ORDER}


@pytest.fixture(scope="module")
def clients() -> Clients:
    return install()


@asynccontextmanager
async def gemini_cli(clients: Clients, tmp_path: Path) -> AsyncIterator[tuple[Stack, GeminiCli, Path]]:
    def adjust(data: dict[str, Any]) -> None:
        data["models"].update(VIA)

    async with running_stack(adjust) as stack:
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        yield (
            stack,
            GeminiCli(clients, tmp_path / "home", stack.url, "any-key-the-gateway-does-not-check"),
            work,
        )


async def run(cli: GeminiCli, prompt: str, cwd: Path, **options: Any) -> Finished:
    async with asyncio.timeout(RUN_LIMIT):
        return await cli.run(prompt, cwd, **options)


def assert_done(finished: Finished, cwd: Path, n: int) -> dict[str, Any]:
    assert finished.returncode == 0, finished.stdout + finished.stderr
    result = orjson.loads(finished.stdout[finished.stdout.index("{") :])
    assert result["response"].strip() == f"The file out{n}.txt now contains: hi{n}", result
    assert (cwd / f"out{n}.txt").read_text() == f"hi{n}\n", "Gemini CLI ran its shell tool"
    return result


async def test_its_shell_tool_through_every_family_in_one_resumed_session(clients, tmp_path):
    """Each step runs Gemini CLI's shell tool on the next family (the command really ran, its
    output went back), all in one session: `gemini --resume latest` carries the whole history
    each time and sends every earlier function response twice. The gateway keeps one result per
    call, restores each call's continuity from its store (Gemini CLI drops thoughts and writes a
    dummy signature), and no simulator rejects anything, Gemini's signature checks included.
    (One session rather than a CLI run per family as well: each run costs seconds of node.)"""
    async with gemini_cli(clients, tmp_path) as (stack, cli, work):
        for n, family in enumerate((*ORDER, "gemini")):
            state = stack.hub.states[KIND[family]]
            before = len(state.requests)
            finished = await run(
                cli,
                shell_task(stack.hub, family, "run_shell_command", n),
                work,
                model=f"via-{family}",
                resume=n > 0,
            )
            assert_done(finished, work, n)
            assert state.script == type(state.script)(), f"{family}: both scripted turns were used"
            assert len(state.requests) == before + 2, f"{family}: the call, then the answer to its output"
            assert f"hi{n}" in orjson.dumps(state.requests[-1].body).decode()
        for kind in {KIND[f] for f in ORDER}:
            assert stack.hub.states[kind].rejections == [], kind
        gemini = stack.hub.states["gemini"]
        last = gemini.requests[-1].body
        sent = orjson.dumps(last).decode()
        assert all(f"hi{n}" in sent for n in range(len(ORDER) + 1)), "every earlier output came back"
        responses = [p for c in last["contents"] for p in c["parts"] if "functionResponse" in p]
        ids = [p["functionResponse"]["id"] for p in responses]
        assert len(ids) == len(set(ids)) == len(ORDER) + 1, "one result per call"
        dropped = {
            name: stack.metrics.registry.get_sample_value(
                "gateway_repairs_total", {"provider": name, "kind": "duplicate_tool_result_dropped"}
            )
            for name in ORDER
        }
        assert dropped["gemini"], f"Gemini CLI's repeated responses were closed: {dropped}"
        assert (
            "skip_thought_signature_validator"
            not in orjson.dumps(
                [r.body for s in stack.hub.states.values() if s is not gemini for r in s.requests]
            ).decode()
        )


EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "gemini-cli.toml"


async def test_the_shipped_gemini_cli_config_routes_its_model_names(clients, tmp_path):
    """config/examples/gemini-cli.toml, pointed at the simulators: Gemini CLI's default model
    reaches Gemini, a family name reaches that family, in one resumed session."""
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
            cli = GeminiCli(
                clients, tmp_path / "home", f"http://{config.server.host}:{config.server.port}", "x"
            )
            routes = (
                (None, "gemini", "gemini-3.1-pro-preview"),
                ("claude", "anthropic", "claude-sonnet-4-5"),
            )
            for n, (model, kind, upstream) in enumerate(routes):
                state = hub.states[kind]
                if model is None:  # "auto": the router's classifier asks which model the turn needs
                    hub.states["gemini"].push(
                        Reply(data={"complexity_reasoning": "a tool", "complexity_score": 90})
                    )
                state.push(
                    Reply(
                        reasoning="Shell.",
                        tool_calls=[
                            ToolCallSpec(
                                "run_shell_command", {"command": f"echo hi{n} > out{n}.txt && cat out{n}.txt"}
                            )
                        ],
                    ),
                    Reply(text=f"The file out{n}.txt now contains: hi{n}"),
                )
                prompt = f"Create a file named out{n}.txt containing hi{n}, then show it."
                assert_done(await run(cli, prompt, work, model=model, resume=n > 0), work, n)
                assert state.rejections == []
                assert any(upstream in r.path + str(r.body.get("model")) for r in state.requests)
        finally:
            await runner.cleanup()
