"""Running the gateway by hand against the simulators, as the README shows: any config pointed at
a simulator hub with one setting, tool-then-answer replies that make every family show a tool loop
(and the repairs it takes), and `python -m gateway.simulators --script FILE`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.config import load_config
from gateway.metrics import Metrics
from gateway.simulators.base import SimulatorHub, free_port
from gateway.simulators.script import ScriptError, load_script
from gateway.simulators.script import install as install_script
from tests.test_cli import _env

ROOT = Path(__file__).resolve().parents[2]
KEY_VARS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "MISTRAL_API_KEY",
    "MOONSHOT_API_KEY",
    "DEEPSEEK_API_KEY",
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1},
            },
            "required": ["city", "unit"],
        },
    },
}
GROUPS = ("claude", "openai", "gemini", "openai-chat", "mistral", "kimi", "deepseek")


@pytest.fixture
async def real_config_on_simulators():
    """config/gateway.toml (the real providers' config), pointed at a hub by GATEWAY_SIMULATORS_URL."""
    async with SimulatorHub(api_key="sim") as hub:
        install_script(hub)
        config = load_config(
            ROOT / "config" / "gateway.toml",
            port=free_port(),
            env={"GATEWAY_SIMULATORS_URL": f"http://127.0.0.1:{hub.port}"},
        )
        runner = web.AppRunner(
            create_app(config, dict.fromkeys(KEY_VARS, "sim"), Metrics()),
            handle_signals=False,
            access_log=None,
        )
        await runner.setup()
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        try:
            yield hub, f"http://{config.server.host}:{config.server.port}"
        finally:
            await runner.cleanup()


async def _turn(http, url: str, group: str, messages: list) -> tuple[dict, str]:
    async with http.post(
        f"{url}/v1/chat/completions", json={"model": group, "messages": messages, "tools": [WEATHER]}
    ) as response:
        body = await response.json()
        assert response.status == 200, body
        return body["choices"][0], response.headers.get("X-Gateway-Repairs", "")


async def _tool_loop(url: str, first_group: str, second_group: str) -> str:
    """A tool call from `first_group`, its result answered by `second_group`: the repairs."""
    messages: list = [{"role": "user", "content": "What is the weather in Paris?"}]
    async with aiohttp.ClientSession() as http:
        choice, _ = await _turn(http, url, first_group, messages)
        assert choice["finish_reason"] == "tool_calls"
        (call,) = choice["message"]["tool_calls"]
        assert call["function"]["name"] == "get_weather"
        # valid for the schema: the required properties, an enum's first value
        assert json.loads(call["function"]["arguments"]) == {"city": "example", "unit": "celsius"}
        messages += [choice["message"], {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21C"}]
        choice, repairs = await _turn(http, url, second_group, messages)
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == "Done: the tool's result is in."
    return repairs


@pytest.mark.parametrize("group", GROUPS)
async def test_every_family_shows_a_tool_loop_through_any_config(real_config_on_simulators, group):
    hub, url = real_config_on_simulators
    await _tool_loop(url, group, group)
    assert all(not state.rejections for state in hub.states.values())


async def test_a_loop_moved_to_another_family_shows_its_repairs(real_config_on_simulators):
    hub, url = real_config_on_simulators
    repairs = await _tool_loop(url, "claude", "mistral")
    # Claude's thinking is not Mistral's, and the call id takes Mistral's 9-character format
    assert repairs == "reasoning_dropped=1,tool_id_projected=1"
    assert all(not state.rejections for state in hub.states.values())


def test_script_files_in_toml_and_json(tmp_path: Path):
    toml = tmp_path / "s.toml"
    toml.write_text(
        '[[reply]]\ntext = "Let me check."\ntool_calls = [{ name = "get_weather", arguments = { city = "Paris" } }]\n'
        '[[reply]]\nprovider = "anthropic"\nfault = { status = 529 }\n'
    )
    (everyone, first), (only, fault) = load_script(toml)
    assert (
        everyone is None
        and first.text == "Let me check."
        and first.tool_calls[0].arguments == {"city": "Paris"}
    )
    assert only == "anthropic" and fault.status == 529
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"reply": [{"text": "hi", "reasoning": "r"}]}))
    ((_, reply),) = load_script(js)
    assert (reply.text, reply.reasoning) == ("hi", "r")
    js.write_text(json.dumps({"reply": [{"txt": "typo"}]}))
    with pytest.raises(ScriptError, match="unknown key 'txt'"):
        load_script(js)


def test_the_simulators_command_answers_a_script_then_tool_then_answer(tmp_path: Path):
    script = tmp_path / "script.toml"
    script.write_text('[[reply]]\nprovider = "openai_chat"\ntext = "Scripted hello."\n')
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.simulators", "--port", str(port), "--script", str(script)],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(7)]
        assert any(f"127.0.0.1:{port}/openai_chat/v1" in line for line in lines), lines
        base = f"http://127.0.0.1:{port}/openai_chat/v1/chat/completions"
        headers = {"Authorization": "Bearer sim"}
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}

        def post(payload):
            request = urllib.request.Request(
                base,
                data=json.dumps(payload).encode(),
                headers={**headers, "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read())

        assert post(body)["choices"][0]["message"]["content"] == "Scripted hello."
        called = post({**body, "tools": [WEATHER]})["choices"][0]["message"]
        assert called["tool_calls"][0]["function"]["name"] == "get_weather"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_a_bad_script_is_refused_by_name(tmp_path: Path):
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"reply": [{"provider": "openai"}]}))
    out = subprocess.run(
        [sys.executable, "-m", "gateway.simulators", "--port", str(free_port()), "--script", str(script)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "reply[0].provider: 'openai' is not a provider kind" in out.stderr
