"""The real Codex CLI (npm @openai/codex, pinned in tests/clients) through the gateway's
Responses ingress to every strict provider simulator: `codex exec -m <group>` with a custom
model provider whose base_url is the gateway (`wire_api = "responses"`), the README's config.

Codex's request shape depends on the model name: an unknown name (a gateway group) gets the
generic tool set (functions, a `namespace` tool, hosted `web_search`); `gpt-5.5` gets the custom
(freeform) `apply_patch` tool and `tool_search`. Each scripted answer is a real tool call Codex
runs in the test's working directory.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gateway.demo import FAMILIES
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec
from tests.clients import node_clis
from tests.e2e.gateway_stack import Gateway, config_with, serve

pytestmark = pytest.mark.clients

FAMILY = [pytest.param(name, kind, id=kind) for name, kind, _, _ in FAMILIES]
PATCH = "*** Begin Patch\n*** Add File: notes.txt\n+patched through the gateway\n*** End Patch\n"


@pytest.fixture(scope="module")
def clients() -> node_clis.Clients:
    return node_clis.install()


@pytest.fixture
async def hub():
    async with SimulatorHub() as hub:
        yield hub


def codex(clients: node_clis.Clients, gateway: Gateway, tmp_path: Path) -> node_clis.Codex:
    return node_clis.Codex(clients, tmp_path / "home", gateway.v1, "client-key-never-forwarded")


def tool_turn(name: str) -> list[Reply]:
    """The model's side of one task: run a command with exec_command, then say what happened."""
    command = f"echo hi-{name} > out-{name}.txt && cat out-{name}.txt"
    return [
        Reply(
            reasoning=f"I will create the file on {name}.",
            tool_calls=[ToolCallSpec("exec_command", {"cmd": command})],
        ),
        Reply(reasoning="The command worked.", text=f"out-{name}.txt contains hi-{name}"),
    ]


def wire_tools(body: dict) -> list[str]:
    """Tool names (or hosted types) of a recorded upstream request, whatever the family's wire."""
    tools = body.get("tools") or []
    names = []
    for tool in tools:
        if "function" in tool:
            names.append(tool["function"]["name"])
        elif "functionDeclarations" in tool:
            names.extend(d["name"] for d in tool["functionDeclarations"])
        else:
            names.append(tool.get("name") or tool["type"])
    return names


@pytest.mark.parametrize("name,kind", FAMILY)
async def test_codex_exec_runs_a_tool_task_on_every_family(clients, hub, tmp_path, name, kind):
    async with serve(hub, config_with(hub)) as gateway:
        hub.states[kind].push(*tool_turn(name))
        work = tmp_path / "work"
        work.mkdir()
        done = await codex(clients, gateway, tmp_path).run("Create the file and show it", work, model=name)

        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip().endswith(f"out-{name}.txt contains hi-{name}")
        assert (work / f"out-{name}.txt").read_text() == f"hi-{name}\n"
        state = hub.states[kind]
        assert state.rejections == []
        first, second = (r.body for r in state.requests)
        # the command's output went back to the model as the call's result
        assert f"hi-{name}" in json.dumps(second)
        # Codex's namespace tool reached the provider under a distinct flat name, and its hosted
        # web_search only where OpenAI runs it (elsewhere left out and counted)
        tools = wire_tools(first)
        assert "exec_command" in tools and "multi_agent_v1__spawn_agent" in tools
        dropped = gateway.sample("gateway_repairs_total", provider=name, kind="hosted_tool_dropped")
        if kind == "openai_responses":
            assert "web_search" in tools and dropped == 0
        else:
            assert "web_search" not in tools and dropped == 2  # once per request
        assert (
            gateway.sample(
                "gateway_requests_total", ingress="responses", model=name, provider=name, outcome="ok"
            )
            == 2
        )


async def test_one_codex_session_resumed_across_all_seven_families(clients, hub, tmp_path):
    """`codex exec` on the first family, then `codex exec resume --last -m <next>` on each other
    family and back to the first: one growing transcript with reasoning and tool calls from
    every family, accepted everywhere, the first family's own tokens verified on its return."""
    order = [*FAMILIES, FAMILIES[0]]
    async with serve(hub, config_with(hub)) as gateway:
        cli = codex(clients, gateway, tmp_path)
        work = tmp_path / "work"
        work.mkdir()
        started = time.monotonic()
        for n, (name, kind, _, _) in enumerate(order):
            hub.states[kind].push(*tool_turn(name))
            done = await cli.run(f"Step {n}: create the file for {name}", work, model=name, resume_last=n > 0)
            assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
            assert done.stdout.strip().endswith(f"out-{name}.txt contains hi-{name}")
            assert (work / f"out-{name}.txt").exists()
        elapsed = time.monotonic() - started
    print(f"8 codex runs across 7 families: {elapsed:.1f}s")
    for _, kind, _, _ in FAMILIES:
        assert hub.states[kind].rejections == [], kind
    # every family's second request replays its own tool loop; Anthropic's thinking signatures
    # come back again after six other families' turns
    assert hub.states["anthropic"].verified_tokens >= 3
    assert hub.states["openai_responses"].verified_tokens >= 1
    assert hub.states["gemini"].verified_tokens >= 1
    # the last request holds every earlier step: the session really was one transcript
    last = json.dumps(hub.states["anthropic"].requests[-1].body)
    assert all(f"hi-{name}" in last for name, _, _, _ in FAMILIES)


@pytest.mark.parametrize("provider", ["claude", "openai"])
async def test_codex_apply_patch_stays_a_custom_tool_call(clients, hub, tmp_path, provider):
    """Codex offers apply_patch as a custom (freeform) tool to `gpt-5.5`: OpenAI gets it natively,
    Anthropic as a one-string function; either way Codex gets a custom_tool_call and applies it."""
    kind = dict((n, k) for n, k, _, _ in FAMILIES)[provider]
    models = {
        "gpt-5.5": {
            "targets": [{"provider": provider, "model": dict((n, m) for n, _, m, _ in FAMILIES)[provider]}]
        }
    }
    async with serve(hub, config_with(hub, models)) as gateway:
        hub.states[kind].push(
            Reply(reasoning="A new file.", tool_calls=[ToolCallSpec("apply_patch", {"input": PATCH})]),
            Reply(text="notes.txt added"),
        )
        work = tmp_path / "work"
        work.mkdir()
        done = await codex(clients, gateway, tmp_path).run("Add notes.txt", work, model="gpt-5.5")
        assert done.returncode == 0, done.stderr[-3000:]
        assert (work / "notes.txt").read_text() == "patched through the gateway\n"
        state = hub.states[kind]
        assert state.rejections == []
        first, second = (r.body for r in state.requests)
        if kind == "openai_responses":
            assert {"type": "custom", "name": "apply_patch"}.items() <= next(
                t for t in first["tools"] if t.get("name") == "apply_patch"
            ).items()
            call = next(i for i in second["input"] if i.get("type") == "custom_tool_call")
            assert call["input"] == PATCH
            assert any(i.get("type") == "custom_tool_call_output" for i in second["input"])
        else:
            spec = next(t for t in first["tools"] if t["name"] == "apply_patch")
            assert spec["input_schema"]["required"] == ["input"]
            assert "lark grammar" in spec["description"]
            use = next(
                b
                for m in second["messages"]
                for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_use"
            )
            assert use["input"] == {"input": PATCH}
        assert (
            gateway.sample(
                "gateway_requests_total",
                ingress="responses",
                model="gpt-5.5",
                provider=provider,
                outcome="ok",
            )
            == 2
        )


@pytest.mark.parametrize("effort", ["low", "high"])
@pytest.mark.parametrize("name,kind", [("openai", "openai_responses"), ("gemini", "gemini")])
async def test_codex_reasoning_effort_reaches_the_family_in_its_own_parameters(
    clients, hub, tmp_path, name, kind, effort
):
    """`model_reasoning_effort` in Codex's config is the client's choice: Responses gets it as
    `reasoning.effort`, Gemini 3 as `thinkingLevel` (README "Reasoning")."""
    async with serve(hub, config_with(hub)) as gateway:
        hub.states[kind].push(*tool_turn(name))
        work = tmp_path / "work"
        work.mkdir()
        cli = codex(clients, gateway, tmp_path)
        cli.extra_config = f'model_reasoning_effort = "{effort}"'
        done = await cli.run("Create the file and show it", work, model=name)
        assert done.returncode == 0, done.stderr[-3000:]
        state = hub.states[kind]
        assert state.rejections == [] and len(state.requests) == 2
        for request in state.requests:
            if kind == "openai_responses":
                assert request.body["reasoning"]["effort"] == effort
            else:
                config = request.body["generationConfig"]["thinkingConfig"]
                assert config == {"thinkingLevel": effort, "includeThoughts": True}
