"""The pinned agent CLIs install from the npm registry and run (`pytest -m clients`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.clients import node_clis

pytestmark = pytest.mark.clients


def _pinned(package: str) -> str:
    manifest = json.loads((node_clis.CLIENTS_DIR / "package.json").read_text())
    return manifest["dependencies"][package]


@pytest.fixture(scope="module")
def clients() -> node_clis.Clients:
    return node_clis.install()


def _version(executable: Path, home: Path) -> str:
    env = node_clis._base_env(home)
    env["CODEX_HOME"] = str(home / ".codex")
    (home / ".codex").mkdir(exist_ok=True)
    result = subprocess.run(
        [str(executable), "--version"], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.strip()


def test_both_clis_install_and_report_their_pinned_versions(clients, tmp_path):
    assert _version(clients.claude, tmp_path) == f"{_pinned('@anthropic-ai/claude-code')} (Claude Code)"
    assert _version(clients.codex, tmp_path) == f"codex-cli {_pinned('@openai/codex')}"


def test_a_second_install_reuses_the_first_without_npm(clients, monkeypatch):
    def no_npm(*args, **kwargs):
        raise AssertionError("npm ci ran again for an installed lock file")

    monkeypatch.setattr(node_clis, "_npm_ci", no_npm)
    assert node_clis.install() == clients


def test_run_environments_never_inherit_the_callers_credentials(clients, tmp_path, monkeypatch):
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "CODEX_HOME",
        "CLAUDE_CONFIG_DIR",
    ):
        monkeypatch.setenv(name, "from-the-caller")
    claude = node_clis.ClaudeCode(clients, tmp_path / "c", "http://127.0.0.1:9/x", "test-key")
    codex = node_clis.Codex(clients, tmp_path / "x", "http://127.0.0.1:9/v1", "test-key")
    for env in (claude.env(), codex.env()):
        assert "from-the-caller" not in env.values()
        assert env["HOME"].startswith(str(tmp_path))
    assert claude.env()["ANTHROPIC_API_KEY"] == "test-key"
    assert codex.env()[node_clis.CODEX_KEY_ENV] == "test-key"
    assert 'base_url = "http://127.0.0.1:9/v1"' in (tmp_path / "x" / ".codex" / "config.toml").read_text()
