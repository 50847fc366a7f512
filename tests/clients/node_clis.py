"""The real agent apps the end-to-end tests drive, from the npm registry: Claude Code, Codex and
Gemini CLI, and the Vercel AI SDK with its Google provider (`ai`, `@ai-sdk/google`).

`install()` runs `npm ci` on the pinned package-lock.json beside this file into a gitignored
directory of the checkout (`.clients/`), once per lock file content: later runs, and other pytest
processes, reuse it. A file lock serialises concurrent installs; the install is built in a
staging directory and renamed into place, so a directory that exists is complete.

Install scripts are not run (`--ignore-scripts`): both packages ship their native executable in a
per-platform optional dependency, which npm selects by os/cpu/libc, and we run that executable
directly. (Claude Code's postinstall only hard-links the same file over its `bin/claude.exe`
placeholder; Codex's `bin/codex.js` is a node launcher that execs the same binary.) Gemini CLI is
one bundled script, run with node (its package has no install script).

The run helpers build an environment from scratch, never from the caller's: a temporary HOME
(and CLAUDE_CONFIG_DIR / CODEX_HOME inside it), the base URL and key of the server under test,
and every switch that keeps the CLIs offline, quiet and deterministic; a run that reaches
beyond loopback anyway fails (tests/clients/offline.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tests.clients import offline

CLIENTS_DIR = Path(__file__).resolve().parent
PACKAGE_FILES = ("package.json", "package-lock.json")
DEFAULT_INSTALL_ROOT = CLIENTS_DIR.parents[1] / ".clients"
INSTALL_TIMEOUT = 900.0  # seconds for `npm ci` (two ~400 MB native packages)
RUN_LIMIT = 300.0  # seconds: a safety net for one CLI invocation; callers may set a tighter one


T = TypeVar("T")


class ClientInstallError(RuntimeError):
    pass


@dataclass(frozen=True)
class Clients:
    """An installed set of CLIs: the npm project directory and each native executable."""

    root: Path
    claude: Path
    codex: Path
    gemini: Path  # Gemini CLI's bundled entry script, run with node


def lock_digest(package_dir: Path = CLIENTS_DIR) -> str:
    """Identity of the pinned set: the package files' content."""
    h = hashlib.sha256()
    for name in PACKAGE_FILES:
        h.update(name.encode() + b"\0" + (package_dir / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _platform_tag() -> str:
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if system is None or arch is None:
        raise ClientInstallError(f"no native CLI build for {sys.platform}/{platform.machine()}")
    return f"{system}-{arch}"


def _one(paths: list[Path], what: str, root: Path) -> Path:
    found = [p for p in paths if p.is_file() and os.access(p, os.X_OK)]
    if len(found) != 1:
        raise ClientInstallError(f"expected one {what} executable under {root}, found {found}")
    return found[0]


def locate(root: Path) -> Clients:
    """The executables of an install at `root` (raises when it is incomplete)."""
    modules = root / "node_modules"
    tag = _platform_tag()
    # npm installs only the optional dependency that matches this machine (libc included:
    # claude-code-linux-x64 or claude-code-linux-x64-musl)
    claude = _one(sorted(modules.glob(f"@anthropic-ai/claude-code-{tag}*/claude")), "claude", root)
    codex = _one(sorted(modules.glob(f"@openai/codex-{tag}/vendor/*/bin/codex")), "codex", root)
    gemini = modules / "@google" / "gemini-cli" / "bundle" / "gemini.js"
    if not gemini.is_file():
        raise ClientInstallError(f"no Gemini CLI under {root}")
    return Clients(root=root, claude=claude, codex=codex, gemini=gemini)


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise ClientInstallError("npm is not on PATH: the end-to-end client tests need node and npm")
    return npm


def _npm_ci(
    staging: Path, timeout: float, package_dir: Path = CLIENTS_DIR, command: Sequence[str] = ("ci",)
) -> None:
    for name in PACKAGE_FILES:
        shutil.copyfile(package_dir / name, staging / name)
    env = {
        **os.environ,
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_update_notifier": "false",
        "npm_config_loglevel": "error",
    }
    result = subprocess.run(
        [_npm(), *command, "--ignore-scripts", "--no-audit", "--no-fund"],
        cwd=staging,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise ClientInstallError(
            f"npm ci failed ({result.returncode}) in {staging}:\n{result.stdout}\n{result.stderr}"
        )


def install(install_root: Path | None = None, timeout: float = INSTALL_TIMEOUT) -> Clients:
    """The pinned CLIs, installed on first use (idempotent, safe across processes)."""
    return install_pinned(CLIENTS_DIR, "npm", locate, install_root, timeout)


def install_pinned(
    package_dir: Path,
    prefix: str,
    locate: Callable[[Path], T],
    install_root: Path | None = None,
    timeout: float = INSTALL_TIMEOUT,
    command: Sequence[str] = ("ci",),
) -> T:
    """The npm project at `package_dir` (its package.json and package-lock.json), installed on
    first use under `install_root/<prefix>-<digest>`; `locate` finds its executables.
    `command`: `npm ci` unless the lock cannot list every platform's optional package."""
    install_root = install_root or DEFAULT_INSTALL_ROOT
    target = install_root / f"{prefix}-{lock_digest(package_dir)}"
    if target.is_dir():
        return locate(target)
    install_root.mkdir(parents=True, exist_ok=True)
    with open(install_root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if target.is_dir():  # another process finished it while we waited
                return locate(target)
            staging = install_root / f".staging-{os.getpid()}"
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            try:
                _npm_ci(staging, timeout, package_dir, command)
                locate(staging)  # complete before it becomes visible
                staging.rename(target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            for old in install_root.glob(f"{prefix}-*"):  # installs of earlier pins
                if old != target:
                    shutil.rmtree(old, ignore_errors=True)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return locate(target)


# ---------------------------------------------------------------------------- running them

# Claude Code: CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC alone stops telemetry, error reports,
# update checks, release notes and model-capability fetches (without it, 2.1.331 opens
# connections to api.anthropic.com even with ANTHROPIC_BASE_URL set); the others say the same
# thing to code paths that read only their own switch.
CLAUDE_QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
# Codex: the `plugins` feature syncs a marketplace from github.com / api.github.com / chatgpt.com
# at start; analytics and feedback are off explicitly; no update check; retries off so a bad
# answer fails the test at once instead of after five reconnects.
CODEX_PROVIDER_ID = "gateway"
CODEX_KEY_ENV = "GATEWAY_API_KEY"


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _base_env(home: Path) -> dict[str, str]:
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        # Codex refuses to set up its helper aliases when CODEX_HOME is under the system temp
        # dir; a TMPDIR of our own keeps both CLIs' scratch files inside the test's home
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        # proxy, npm registry and package index at a loopback listener that fails the run when
        # anything reaches it (tests/clients/offline.py); loopback itself is reached directly
        **offline.guard().env(),
    }


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict:
        """Claude Code `--output-format json`: the one result object."""
        return json.loads(self.stdout)

    def json_lines(self) -> list[dict]:
        """Claude Code `stream-json` / Codex `--json`: one event per line."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]


async def run_cli(argv: Sequence[str], env: dict[str, str], cwd: Path, stdin: str | None = None) -> Finished:
    """Run one CLI invocation without blocking the event loop (the servers it talks to run in
    the same loop). Cancelled (e.g. by the caller's `asyncio.timeout`) or past RUN_LIMIT, its
    whole process group is killed."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    mark = offline.guard().mark()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its children (the shell running a tool call) share the group
    )
    try:
        async with asyncio.timeout(RUN_LIMIT):
            out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise
    offline.check(mark, argv[0])
    return Finished(
        proc.returncode if proc.returncode is not None else -1,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        loop.time() - started,
    )


@dataclass
class _Cli(ABC):
    """One CLI pointed at the server under test, with its own home."""

    clients: Clients
    home: Path
    base_url: str
    api_key: str
    extra_env: dict[str, str] = field(default_factory=dict)  # last word, e.g. a proxy to record

    def env(self) -> dict[str, str]:
        env = _base_env(self.home)
        env.update(self.own_env())
        env.update(self.extra_env)
        return env

    @abstractmethod
    def own_env(self) -> dict[str, str]:
        """What this CLI needs on top of the common base."""

    @abstractmethod
    def command(self, prompt: str, **options) -> list[str]: ...

    async def run(self, prompt: str, cwd: Path, **options) -> Finished:
        return await run_cli(self.command(prompt, **options), self.env(), cwd)


@dataclass
class ClaudeCode(_Cli):
    """`claude -p` against an Anthropic Messages endpoint at `base_url` (without `/v1`).

    `auth`: "x-api-key" (ANTHROPIC_API_KEY) or "bearer" (ANTHROPIC_AUTH_TOKEN, sent as
    `Authorization: Bearer`). `thinking`: None leaves Claude Code's default (it asks for
    thinking), False sends `thinking: {"type": "disabled"}` (MAX_THINKING_TOKENS=0).
    """

    auth: str = "x-api-key"
    thinking: bool | None = None

    def own_env(self) -> dict[str, str]:
        env = dict(CLAUDE_QUIET_ENV)
        env["CLAUDE_CONFIG_DIR"] = str(self.home / ".claude")
        env["ANTHROPIC_BASE_URL"] = self.base_url
        if self.auth == "bearer":
            env["ANTHROPIC_AUTH_TOKEN"] = self.api_key
        elif self.auth == "x-api-key":
            env["ANTHROPIC_API_KEY"] = self.api_key
        else:
            raise ValueError(f"unknown auth {self.auth!r}")
        if self.thinking is False:
            env["MAX_THINKING_TOKENS"] = "0"
        return env

    def command(
        self,
        prompt: str,
        *,
        model: str | None = None,
        continue_session: bool = False,
        output_format: str = "json",
        allowed_tools: Sequence[str] = ("Bash",),
        extra: Sequence[str] = (),
    ) -> list[str]:
        argv = [str(self.clients.claude)]
        if continue_session:
            argv.append("-c")  # the most recent session of this home and working directory
        argv += ["-p", prompt, "--output-format", output_format]
        if output_format == "stream-json":
            argv.append("--verbose")  # print mode refuses stream-json without it
        if model is not None:
            argv += ["--model", model]
        if allowed_tools:
            # pre-approved tools run without a prompt; --dangerously-skip-permissions is refused
            # when running as root, which CI containers often are
            argv += ["--allowedTools", ",".join(allowed_tools)]
        return argv + list(extra)


@dataclass
class Codex(_Cli):
    """`codex exec` with a custom model provider whose `base_url` (ending in `/v1`) speaks the
    Responses API; the home's config.toml is (re)written by `env()`."""

    model: str = "gpt-5.5"
    extra_config: str = ""  # more top-level TOML lines

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def config_toml(self) -> str:
        return "\n".join(
            [
                f"model = {_toml_str(self.model)}",
                f"model_provider = {_toml_str(CODEX_PROVIDER_ID)}",
                'approval_policy = "never"',
                # no bubblewrap sandbox: tool calls run directly in the test's working directory
                'sandbox_mode = "danger-full-access"',
                "check_for_update_on_startup = false",
                self.extra_config,
                "",
                "[features]",
                "plugins = false",
                "",
                "[analytics]",
                "enabled = false",
                "",
                "[feedback]",
                "enabled = false",
                "",
                f"[model_providers.{CODEX_PROVIDER_ID}]",
                f"name = {_toml_str(CODEX_PROVIDER_ID)}",
                f"base_url = {_toml_str(self.base_url)}",
                f"env_key = {_toml_str(CODEX_KEY_ENV)}",
                'wire_api = "responses"',
                "request_max_retries = 0",
                "stream_max_retries = 0",
                "",
            ]
        )

    def own_env(self) -> dict[str, str]:
        self.codex_home.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text(self.config_toml())
        return {"CODEX_HOME": str(self.codex_home), CODEX_KEY_ENV: self.api_key}

    def command(
        self,
        prompt: str,
        *,
        model: str | None = None,
        resume_last: bool = False,
        json_events: bool = False,
        extra: Sequence[str] = (),
    ) -> list[str]:
        argv = [str(self.clients.codex), "exec"]
        if resume_last:
            argv += ["resume", "--last"]  # the newest session recorded under this CODEX_HOME
        # --strict-config: a config key this version does not know fails loudly
        argv += ["--skip-git-repo-check", "--strict-config"]
        if model is not None:
            argv += ["-m", model]
        if json_events:
            argv.append("--json")
        return argv + list(extra) + [prompt]


@dataclass
class GeminiCli(_Cli):
    """`gemini -p` with `GOOGLE_GEMINI_BASE_URL` at the gateway (without `/v1beta`). Headless, it
    needs the auth method chosen in settings (`security.auth.selectedType`), else it exits
    "Invalid auth method selected"; `env()` writes that settings file into the home, with
    telemetry, update checks and its usage statistics off."""

    def settings(self) -> dict:
        return {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "ui": {"hideTips": True},
        }

    def own_env(self) -> dict[str, str]:
        directory = self.home / ".gemini"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "settings.json").write_text(json.dumps(self.settings()))
        return {
            "GOOGLE_GEMINI_BASE_URL": self.base_url,
            "GEMINI_API_KEY": self.api_key,
            "GEMINI_CLI_NO_RELAUNCH": "true",  # no second node process with a bigger heap
            "CI": "1",
        }

    def command(
        self, prompt: str, *, model: str | None = None, resume: bool = False, extra: Sequence[str] = ()
    ) -> list[str]:
        node = shutil.which("node") or "node"
        argv = [node, str(self.clients.gemini), "-p", prompt, "--output-format", "json", "--yolo"]
        if model is not None:
            argv += ["-m", model]
        if resume:
            argv += ["--resume", "latest"]
        return argv + list(extra)
