"""More real agent apps the end-to-end tests drive through the gateway: opencode and qwen-code
(npm, pinned in `agents/package-lock.json`, installed like Claude Code and Codex by
`node_clis.install_pinned`) and aider (PyPI, pinned below, in a virtual environment of its own
under `.clients/`: its many pinned dependencies must not move the project's).

Crush (`@charmland/crush`) is not here: its npm package downloads its executable from GitHub in
a postinstall script, which machines that reach only the package registries cannot run.

Each run helper builds the CLI's environment from scratch (node_clis._base_env: a temporary
HOME), points the CLI at the gateway and turns off what would reach the internet.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.clients.node_clis import (
    CLIENTS_DIR,
    DEFAULT_INSTALL_ROOT,
    ClientInstallError,
    Finished,
    _base_env,
    _one,
    _platform_tag,
    install_pinned,
    run_cli,
)

AGENTS_DIR = CLIENTS_DIR / "agents"
AIDER = "aider-chat==0.86.2"
AIDER_INSTALL_TIMEOUT = 900.0


@dataclass(frozen=True)
class Agents:
    root: Path
    opencode: Path
    qwen: Path  # qwen-code's entry script, run with node


def locate_agents(root: Path) -> Agents:
    modules = root / "node_modules"
    tag = _platform_tag()
    # npm installs the builds that match this machine's os/cpu/libc; the plain one needs AVX2,
    # the "baseline" one does not: either runs the same CLI
    builds = sorted(modules.glob(f"opencode-{tag}*/bin/opencode"), key=lambda p: "baseline" in str(p))
    if not builds:
        raise ClientInstallError(f"no opencode executable under {root}")
    qwen = modules / "@qwen-code" / "qwen-code" / "cli-entry.js"
    if not qwen.is_file():
        raise ClientInstallError(f"no qwen-code entry script under {root}")
    return Agents(root=root, opencode=_one(builds[:1], "opencode", root), qwen=qwen)


def install_agents(install_root: Path | None = None) -> Agents:
    # `npm install` on the lock, not `npm ci`: qwen-code's clipboard addon lists per-platform
    # packages that the registry does not serve, so no lock can name them and `npm ci` refuses
    # the lock as out of sync; every package the lock does name installs at its pinned version
    return install_pinned(AGENTS_DIR, "agents", locate_agents, install_root, command=("install", "--no-save"))


def install_aider(install_root: Path | None = None) -> Path:
    """aider's executable in a virtual environment of its own, made on first use (file-locked; a
    venv names its own path in its scripts, so it is built in place and marked complete last)."""
    install_root = install_root or DEFAULT_INSTALL_ROOT
    digest = hashlib.sha256(f"{AIDER} {sys.version_info[:2]}".encode()).hexdigest()[:16]
    target = install_root / f"aider-{digest}"
    executable, complete = target / "bin" / "aider", target / ".complete"
    if complete.is_file():
        return executable
    install_root.mkdir(parents=True, exist_ok=True)
    with open(install_root / ".lock-aider", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if complete.is_file():  # another process finished it while we waited
                return executable
            shutil.rmtree(target, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, timeout=120)
            result = subprocess.run(
                [str(target / "bin" / "python"), "-m", "pip", "install", "--quiet", AIDER],
                capture_output=True,
                text=True,
                timeout=AIDER_INSTALL_TIMEOUT,
                check=False,
            )
            if result.returncode != 0 or not executable.is_file():
                raise ClientInstallError(f"pip install {AIDER} failed:\n{result.stdout}\n{result.stderr}")
            complete.touch()
            for old in install_root.glob("aider-*"):  # installs of earlier pins
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return executable


# ---------------------------------------------------------------------------- running them


@dataclass
class QwenCode:
    """`qwen -p` on the OpenAI-compatible (Chat Completions) endpoint at `base_url` (with /v1)."""

    agents: Agents
    home: Path
    base_url: str
    api_key: str

    def env(self, model: str) -> dict[str, str]:
        env = _base_env(self.home)
        env.update(
            {
                "OPENAI_API_KEY": self.api_key,
                "OPENAI_BASE_URL": self.base_url,
                "OPENAI_MODEL": model,
                "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
                # the same program in one node process, not relaunched in another with a bigger
                # heap (as GEMINI_CLI_NO_RELAUNCH for Gemini CLI): each relaunch loaded and
                # compiled the whole bundle a second time
                "QWEN_CODE_NO_RELAUNCH": "true",
                # its usage statistics go to Alibaba Cloud's RUM service (on by default)
                "QWEN_USAGE_STATISTICS_ENABLED": "false",
            }
        )
        return env

    async def run(self, prompt: str, cwd: Path, model: str, continue_session: bool = False) -> Finished:
        argv = [shutil.which("node") or "node", str(self.agents.qwen)]
        if continue_session:
            argv.append("-c")  # the most recent session of this home and working directory
        argv += ["-p", prompt, "--yolo", "-o", "json"]
        return await run_cli(argv, self.env(model), cwd)


PLUGIN_PACKAGE = "@opencode-ai/plugin"


def provide_plugin_package(config_dir: Path, agents: Agents) -> None:
    """opencode's config directory with `@opencode-ai/plugin` installed, from the pinned install.

    At every start opencode has its own npm (arborist, in process, in the background) add that
    package (the API its plugins import) to each config directory, unless the directory already
    has a node_modules and a package-lock.json naming every dependency its package.json names
    and the plugin package (opencode's Npm.install). Without this each run asked the npm
    registry; the package is linked from the pinned install, at the version of opencode itself.
    """
    version = json.loads((agents.root / "node_modules" / PLUGIN_PACKAGE / "package.json").read_bytes())[
        "version"
    ]
    dependencies = {PLUGIN_PACKAGE: version}
    (config_dir / "package.json").write_text(json.dumps({"dependencies": dependencies}))
    lock = {"lockfileVersion": 3, "requires": True, "packages": {"": {"dependencies": dependencies}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock))
    link = config_dir / "node_modules" / PLUGIN_PACKAGE
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(agents.root / "node_modules" / PLUGIN_PACKAGE, target_is_directory=True)


@dataclass
class OpenCode:
    """`opencode run` with a custom provider on `@ai-sdk/openai-compatible` (Chat Completions at
    `base_url`, with /v1). `small_model` takes opencode's title-generation request: a group other
    than the one a test scripts, so that request does not consume a scripted reply."""

    agents: Agents
    home: Path
    base_url: str
    api_key: str
    # every model group the session may use: a continued session names the model of its earlier
    # turns, and opencode refuses one its config does not list
    groups: tuple[str, ...] = ()

    def env(self, model: str, small_model: str) -> dict[str, str]:
        config_dir = self.home / ".config" / "opencode"
        config_dir.mkdir(parents=True, exist_ok=True)
        models = {name: {"name": name} for name in (*self.groups, model, small_model)}
        config = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
            "provider": {
                "gateway": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "gateway",
                    "options": {"baseURL": self.base_url, "apiKey": self.api_key},
                    "models": models,
                }
            },
            "model": f"gateway/{model}",
            "small_model": f"gateway/{small_model}",
        }
        (config_dir / "opencode.json").write_text(json.dumps(config))
        provide_plugin_package(config_dir, self.agents)
        env = _base_env(self.home)
        # nothing that reaches for the internet: update checks, the models.dev catalogue, default
        # plugins, language-server downloads, sharing, Claude Code's skills and prompts
        for switch in (
            "AUTOUPDATE",
            "MODELS_FETCH",
            "DEFAULT_PLUGINS",
            "LSP_DOWNLOAD",
            "SHARE",
            "CLAUDE_CODE",
            "EXTERNAL_SKILLS",
        ):
            env[f"OPENCODE_DISABLE_{switch}"] = "1"
        return env

    async def run(
        self, prompt: str, cwd: Path, model: str, small_model: str, continue_session: bool = False
    ) -> Finished:
        # -m: a continued session would otherwise keep the model of its last turn
        argv = [str(self.agents.opencode), "run", "-m", f"gateway/{model}"]
        if continue_session:
            argv.append("-c")  # continue the last session
        argv.append(prompt)
        return await run_cli(argv, self.env(model, small_model), cwd)


# what aider and litellm need to know of a gateway model group (aider's model metadata file)
MODEL_METADATA = {
    "max_input_tokens": 128000,
    "max_output_tokens": 8192,
    "max_tokens": 8192,
    "input_cost_per_token": 0.0,
    "output_cost_per_token": 0.0,
    "litellm_provider": "openai",
    "mode": "chat",
}


@dataclass
class Aider:
    """`aider --model openai/<group>` against the Chat Completions endpoint at `base_url` (with
    /v1), one message, whole-file edits, no git, no prompts."""

    executable: Path
    home: Path
    base_url: str
    api_key: str

    async def run(self, message: str, cwd: Path, model: str, files: list[str]) -> Finished:
        env = _base_env(self.home)
        env.update(
            {
                "OPENAI_API_KEY": self.api_key,
                "OPENAI_API_BASE": self.base_url,
                # litellm's price list from its package, not fetched from GitHub at import
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            }
        )
        # the model described locally: aider looks a model it does not know up in litellm's
        # price list, which it otherwise fetches from GitHub (and keeps a day under ~/.aider)
        metadata = self.home / "model-metadata.json"
        metadata.write_text(json.dumps({f"openai/{model}": MODEL_METADATA}))
        argv = [
            str(self.executable),
            "--model",
            f"openai/{model}",
            "--model-metadata-file",
            str(metadata),
            "--edit-format",
            "whole",
            "--no-git",
            "--yes-always",
            "--no-check-update",
            "--no-show-model-warnings",
            "--no-stream",
            "--no-pretty",
            "--no-analytics",
            "--map-tokens",
            "0",
            "--message",
            message,
            *files,
        ]
        return await run_cli(argv, env, cwd)
