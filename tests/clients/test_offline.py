"""The agent apps' runs are held to loopback (tests/clients/offline.py), and opencode's config
directory comes with the package opencode would otherwise fetch at every start."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.clients import agent_clis, node_clis, offline

FETCH = """
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=10).read()
except Exception as exc:
    print(type(exc).__name__, exc)
else:
    print("fetched")
"""


async def run_python(tmp_path: Path, url: str) -> node_clis.Finished:
    env = node_clis._base_env(tmp_path / "home")
    return await node_clis.run_cli([sys.executable, "-c", FETCH, url], env, tmp_path)


async def test_a_run_that_reaches_beyond_loopback_fails(tmp_path):
    with pytest.raises(offline.ReachedTheNetwork, match=r"CONNECT registry\.npmjs\.org:443"):
        await run_python(tmp_path, "https://registry.npmjs.org/@opencode-ai%2fplugin")
    with pytest.raises(offline.ReachedTheNetwork, match=r"GET http://example\.com/"):
        await run_python(tmp_path, "http://example.com/")


async def test_a_run_that_asks_its_package_registry_fails(tmp_path):
    env = node_clis._base_env(tmp_path / "home")
    with pytest.raises(offline.ReachedTheNetwork, match=r"GET /@opencode-ai%2fplugin"):
        await run_python(tmp_path, env["npm_config_registry"] + "@opencode-ai%2fplugin")


async def test_a_run_on_loopback_passes(tmp_path):
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        for host in ("127.0.0.1", "localhost"):
            finished = await run_python(tmp_path, f"http://{host}:{port}/v1")
            assert finished.stdout.strip() == "fetched", finished.stdout + finished.stderr


def test_the_plugin_package_is_pinned_at_opencodes_own_version():
    """opencode asks for `@opencode-ai/plugin` at exactly its own version."""
    pinned = json.loads((agent_clis.AGENTS_DIR / "package.json").read_text())["dependencies"]
    assert pinned[agent_clis.PLUGIN_PACKAGE] == pinned["opencode-ai"]


def test_opencodes_config_directory_has_the_plugin_package_installed(tmp_path):
    """What opencode checks before it installs into a config directory: a node_modules, and a
    package-lock.json naming every dependency of its package.json and the plugin package."""
    root = tmp_path / "install"
    package = root / "node_modules" / agent_clis.PLUGIN_PACKAGE
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": agent_clis.PLUGIN_PACKAGE, "version": "9.8.7"}))
    agents = agent_clis.Agents(root=root, opencode=root / "opencode", qwen=root / "qwen.js")
    config_dir = tmp_path / "home" / ".config" / "opencode"
    config_dir.mkdir(parents=True)
    for _ in range(2):  # a continued session's run provides it again
        agent_clis.provide_plugin_package(config_dir, agents)
    wanted = set(json.loads((config_dir / "package.json").read_text())["dependencies"])
    locked = json.loads((config_dir / "package-lock.json").read_text())["packages"][""]["dependencies"]
    assert wanted | {agent_clis.PLUGIN_PACKAGE} <= set(locked)
    assert locked[agent_clis.PLUGIN_PACKAGE] == "9.8.7"
    installed = config_dir / "node_modules" / agent_clis.PLUGIN_PACKAGE
    assert installed.resolve() == package.resolve()
