"""The command line as a user runs it: real subprocesses."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from gateway.demo import run_demo
from gateway.simulators.base import free_port

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env.update(extra)
    return env


def _check_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(path)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_config_prints_the_resolved_config_without_secrets():
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", "config/simulated.toml"],
        cwd=ROOT,
        env=_env(SIM_API_KEY="planted-secret-value"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "[providers.claude]" in out.stdout and "SIM_API_KEY" in out.stdout
    assert "planted-secret-value" not in out.stdout + out.stderr


def test_check_config_reports_the_key_path_of_a_mistake(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[providers.x]\nkind = "anthropic"\nbase_url = "https://a"\napi_key_env = "K"\nkindd = 1\n'
    )
    out = _check_config(bad)
    assert out.returncode == 2
    assert "providers.x.kindd: unknown key" in out.stderr


def test_check_config_names_a_reasoning_setting_the_model_cannot_honour(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[providers.oai]\nkind = "openai_chat"\nbase_url = "https://a"\napi_key_env = "K"\n'
        '[providers.gem]\nkind = "gemini"\nbase_url = "https://g"\napi_key_env = "K"\n'
        "[models.m]\ntargets = [\n"
        '  { provider = "oai", model = "gpt-4.1", reasoning_effort = "high" },\n'
        '  { provider = "oai", model = "gpt-5", reasoning_effort = "none" },\n'
        '  { provider = "gem", model = "gemini-3-pro-preview", thinking_budget = 2048 },\n'
        '  { provider = "gem", model = "gemini-2.5-flash", thinking_budget = 4096 },\n'
        "]\n"
    )
    out = _check_config(bad)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 3, out.stderr
    assert "models.m.targets[0].reasoning_effort: gpt-4.1 does not reason" in lines[0]
    assert "models.m.targets[1].reasoning_effort: gpt-5 cannot turn its reasoning off" in lines[1]
    assert "models.m.targets[2].thinking_budget: gemini-3-pro-preview takes no thinking budget" in lines[2]


def test_serve_announces_itself_and_exits_cleanly_on_sigterm():
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", "config/simulated.toml", "--port", str(port)],
        cwd=ROOT,
        env=_env(SIM_API_KEY="x"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == f"gateway listening on http://127.0.0.1:{port}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_demo_runs_every_family_without_a_rejection(capsys):
    assert await run_demo(verbose=True) == 0
    out = capsys.readouterr().out
    assert "29 turns on 7 provider families" in out
    assert out.rstrip().endswith("0 failed conversations, 0 provider rejections")
    assert "continuity_restored" in out and "synthetic_tool_result=4" in out


def test_serve_says_at_startup_which_provider_keys_are_unset_and_takes_a_log_level():
    port = free_port()
    env = _env()
    env.pop("SIM_API_KEY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--config", "config/simulated.toml", "--port", str(port)]
        + ["--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == f"gateway listening on http://127.0.0.1:{port}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (
        "gateway: warning: providers.claude.api_key_env: environment variable SIM_API_KEY is not set:"
        " requests routed to provider 'claude' will fail" in stderr
    )
    assert "gateway stopped" not in stderr  # an INFO line: --log-level warning took effect


def test_serve_help_explains_its_options():
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--help"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0
    for option in ("--host HOST", "--port PORT", "--log-level", "--workers", "--config"):
        assert option in out.stdout
    assert "127.0.0.1" in out.stdout and "8787" in out.stdout


async def test_inspect_lists_shows_and_previews_requests_of_a_running_gateway():
    import asyncio

    from gateway.simulators.base import SimulatorHub
    from tests.inspector.loop import inspector_gateway, run_loop, script

    async with SimulatorHub() as hub:
        script(hub)
        async with inspector_gateway(hub) as gw:
            loop = await run_loop(gw.url)

            async def inspect(*args: str) -> tuple[int, str, str]:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "gateway",
                    "inspect",
                    *args,
                    cwd=ROOT,
                    env=_env(GATEWAY_URL=gw.url),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                out, err = await asyncio.wait_for(proc.communicate(), 60)
                return proc.returncode, out.decode(), err.decode()

            code, listed, _ = await inspect()
            assert code == 0
            assert [line.split()[1] for line in listed.splitlines()] == loop.ids  # oldest first
            code, shown, _ = await inspect(loop.ids[2])
            assert code == 0
            assert "  - #1 assistant reasoning: Claude considers the weather.   [dropped]" in shown
            assert re.search(
                r"  ~ #1 assistant tool_call get_weather call_\w{24}: .* => .* get_weather [A-Za-z0-9]{9}: ",
                shown,
            )
            code, previewed, _ = await inspect(loop.ids[2], "--preview", "claude")
            assert code == 0 and previewed.startswith("claude (anthropic, claude-sonnet-4-5) would receive")
            code, _, err = await inspect("no-such-request")
            assert code == 1 and "404" in err
