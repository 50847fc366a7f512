"""Packaging without Docker: the Dockerfile is parsed and linted (slim Python 3.11 base, non-root
user, health check on /healthz, runtime dependencies only, config from a volume, copied paths
that exist and that .dockerignore lets through), and every example config validates."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.config import is_loopback_host, load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "config" / "examples").glob("*.toml"))


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def words(self) -> list[str]:
        """Exec form (a JSON array) or shell-like words."""
        if self.args.startswith("["):
            return json.loads(self.args)
        return shlex.split(self.args)


def parse_dockerfile(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are dropped by Docker
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    out: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            out.append([])
        assert out, f"line {ins.line}: {ins.keyword} before the first FROM"
        out[-1].append(ins)
    return out


def flags(ins: Instruction) -> tuple[dict[str, str], list[str]]:
    words = ins.words() if not ins.args.startswith("[") else [ins.args]
    found = {}
    rest = []
    for word in words:
        if word.startswith("--") and "=" in word:
            key, _, value = word[2:].partition("=")
            found[key] = value
        else:
            rest.append(word)
    return found, rest


def docker_ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern that matches the path or one of its parent
    directories decides; `!` re-includes; `**` matches any number of directories."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.strip("/")
        regex = re.escape(body).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, c) for c in candidates):
            ignored = not negate
    return ignored


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())


def test_every_stage_builds_on_slim_python_311(dockerfile):
    for stage in stages(dockerfile):
        image = stage[0].words()[0]
        assert image == "python:3.11-slim", image


def test_the_runtime_stage_runs_as_a_non_root_user(dockerfile):
    runtime = stages(dockerfile)[-1]
    users = [ins for ins in runtime if ins.keyword == "USER"]
    assert users, "the runtime stage never leaves root"
    user = users[-1].words()[0].split(":")[0]
    assert user not in ("root", "0")
    start = next(i for i, ins in enumerate(runtime) if ins.keyword == "ENTRYPOINT")
    assert runtime.index(users[-1]) < start
    # the uid is created in the image
    created = " ".join(ins.args for ins in runtime if ins.keyword == "RUN")
    assert re.search(
        rf"useradd\b[^&]*--uid {user}\b" if user.isdigit() else rf"useradd\b[^&]* {user}\b", created
    )


def test_the_health_check_probes_healthz_on_the_configured_port(dockerfile):
    runtime = stages(dockerfile)[-1]
    checks = [ins for ins in runtime if ins.keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    options, rest = flags(Instruction("HEALTHCHECK", checks[0].args.partition(" CMD ")[0], 0))
    assert {"interval", "timeout", "retries"} <= set(options)
    command = json.loads(checks[0].args.partition(" CMD ")[2])
    assert command[:2] == ["python", "-c"] and "/healthz" in command[2] and "GATEWAY_PORT" in command[2]
    compile(command[2], "<healthcheck>", "exec")  # the probe is valid Python
    env = " ".join(ins.args for ins in runtime if ins.keyword == "ENV")
    assert "GATEWAY_PORT=8787" in env
    assert [ins.args for ins in runtime if ins.keyword == "EXPOSE"] == ["8787"]


def test_the_config_comes_from_a_volume_and_the_entrypoint_serves(dockerfile):
    runtime = stages(dockerfile)[-1]
    volumes = [v for ins in runtime if ins.keyword == "VOLUME" for v in ins.words()]
    assert "/config" in volumes
    env = " ".join(ins.args for ins in runtime if ins.keyword == "ENV")
    assert "GATEWAY_CONFIG=/config/" in env
    # listening on all interfaces in a container: the gateway then insists on [auth] tokens
    assert "GATEWAY_HOST=0.0.0.0" in env
    assert [ins.words() for ins in runtime if ins.keyword == "ENTRYPOINT"] == [["gateway"]]
    assert [ins.words() for ins in runtime if ins.keyword == "CMD"] == [["serve"]]
    assert [ins.args for ins in runtime if ins.keyword == "STOPSIGNAL"] == ["SIGTERM"]


def test_only_runtime_dependencies_are_installed(dockerfile):
    runs = " ".join(ins.args for ins in dockerfile if ins.keyword == "RUN")
    assert "pip install ." in runs
    assert "[dev]" not in runs and "pytest" not in runs and "requirements" not in runs
    runtime = stages(dockerfile)[-1]
    # the runtime stage gets the built venv, never the sources or a compiler
    copies = [flags(ins) for ins in runtime if ins.keyword == "COPY"]
    assert copies and all(options.get("from") for options, _ in copies)
    assert not any("apt-get install" in ins.args for ins in runtime if ins.keyword == "RUN")


def test_copied_paths_exist_and_pass_the_dockerignore(dockerfile):
    patterns = dockerignore_patterns()
    sources = []
    for ins in dockerfile:
        if ins.keyword not in ("COPY", "ADD"):
            continue
        options, words = flags(ins)
        if "from" in options:
            continue
        sources.extend(words[:-1])
    assert sources
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: no such path in the repository"
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for file in files:
            rel = file.relative_to(ROOT).as_posix()
            if "__pycache__" in rel:
                assert docker_ignored(rel, patterns), rel
                continue
            assert not docker_ignored(rel, patterns), f"{rel} is copied but .dockerignore excludes it"
    # what must never be in the build context
    for rel in (".git/config", ".venv/bin/python", "tests/conftest.py", ".gateway/continuity.db", ".env"):
        assert docker_ignored(rel, patterns), rel


def test_the_dockerignore_matcher_follows_dockers_rules():
    patterns = ["*", "!gateway/", "**/__pycache__", "!keep/**/x.py"]
    assert docker_ignored("README.md", patterns)
    assert not docker_ignored("gateway/app.py", patterns)
    assert docker_ignored("gateway/sub/__pycache__/a.pyc", patterns)
    assert not docker_ignored("keep/a/b/x.py", patterns)
    assert docker_ignored("keep/a/b/y.py", patterns)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_each_example_config_validates_and_is_commented(path):
    config = load_config(path, env={})
    text = path.read_text()
    assert text.startswith("# Deployment shape")
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 8
    assert not re.search(r"\"(sk-|AIza|Bearer )", text)  # keys are named, never written
    assert config.models


def test_the_examples_cover_the_deployment_shapes():
    configs = {p.stem: load_config(p, env={}) for p in EXAMPLES}
    assert set(configs) == {"single-provider", "failover", "round-robin-redis", "claude-code", "gemini-cli"}

    single = configs["single-provider"]
    assert len(single.providers) == 1 and is_loopback_host(single.server.host)

    failover = configs["failover"]
    groups = [g for g in failover.models.values() if g.strategy == "failover"]
    kinds = {failover.providers[t.provider].kind for g in groups for t in g.targets}
    assert groups and len(kinds) >= 2

    replicas = configs["round-robin-redis"]
    assert replicas.store.backend == "redis"
    assert any(g.strategy == "round_robin" for g in replicas.models.values())
    assert not is_loopback_host(replicas.server.host) and replicas.auth is not None

    claude_code = configs["claude-code"]  # Claude Code's model names route to every family
    assert {"claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-5"} <= set(claude_code.models)
    assert {p.kind for p in claude_code.providers.values()} == {
        "anthropic", "openai_responses", "openai_chat", "gemini", "mistral", "kimi", "deepseek"
    }  # fmt: skip

    gemini_cli = configs["gemini-cli"]  # Gemini CLI's model names (0.61's "auto" included) route
    assert {
        "gemini-3.1-pro-preview", "gemini-3.5-flash-lite", "gemini-3.8-flash", "gemini-2.5-pro", "gemini-2.5-flash"
    } <= set(gemini_cli.models)  # fmt: skip
    assert len({p.kind for p in gemini_cli.providers.values()}) == 7


# -- reproducible installs ---------------------------------------------------------------------
LOCK = ROOT / "runtime.lock"
# (package, the first version without the advisory): floors pyproject.toml must keep
CVE_FLOORS = {"aiohttp": "3.14.1", "orjson": "3.9.15"}


def _pyproject_requirements():
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def _locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (pinned version, sha256 hashes) of every requirement in runtime.lock."""
    from packaging.utils import canonicalize_name

    out: dict[str, tuple[str, list[str]]] = {}
    text = LOCK.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, _, options = line.partition(" --hash=")
        name, sep, version = requirement.split(";")[0].strip().partition("==")
        assert sep, f"runtime.lock: {line[:60]!r} is not pinned with =="
        hashes = re.findall(r"sha256:([0-9a-f]{64})", "--hash=" + options)
        out[canonicalize_name(name)] = (version.strip(), hashes)
    return out


def test_the_lock_pins_every_runtime_dependency_inside_pyprojects_ranges_with_hashes():
    from packaging.utils import canonicalize_name

    locked = _locked()
    assert locked, "runtime.lock is empty"
    for name, (version, hashes) in locked.items():
        assert hashes, f"{name}=={version} has no --hash"
    for requirement in _pyproject_requirements():
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement} is not in runtime.lock"
        assert requirement.specifier.contains(locked[name][0]), (
            f"runtime.lock pins {name}=={locked[name][0]}, outside pyproject's {requirement}"
        )


def test_pyproject_keeps_the_cve_floors():
    from packaging.version import Version

    by_name = {r.name: r for r in _pyproject_requirements()}
    for name, floor in CVE_FLOORS.items():
        specifier = by_name[name].specifier
        below = Version(floor).release[:-1] + (Version(floor).release[-1] - 1,)
        assert not specifier.contains(".".join(map(str, below))), (
            f"{name}: {specifier} allows a version below {floor}"
        )
        assert specifier.contains(floor)


def test_the_image_installs_the_locked_dependencies_with_hashes(dockerfile):
    build = stages(dockerfile)[0]
    copied = [word for ins in build if ins.keyword == "COPY" for word in flags(ins)[1][:-1]]
    assert "runtime.lock" in copied
    runs = " ".join(ins.args for ins in build if ins.keyword == "RUN")
    assert "pip install --require-hashes --no-deps -r runtime.lock" in runs
    # the gateway itself then resolves nothing: its dependencies are the locked ones
    assert "pip install . --no-deps" in runs and "pip check" in runs
    assert runs.index("-r runtime.lock") < runs.index("pip install . --no-deps")


def test_ci_tests_the_locked_and_the_newest_allowed_dependencies():
    script = (ROOT / ".ci" / "run").read_text()
    assert '"$uv" pip install --quiet --python .venv/bin/python --require-hashes --no-deps -r runtime.lock' in script
    # the newest venv: the project's requirements and its dev extra (what `-e '.[dev]'` would
    # install), each the newest allowed, then the project itself
    assert "project['dependencies'] + project['optional-dependencies']['dev']" in script
    assert '"$uv" pip install --quiet --python .venv-newest/bin/python --upgrade -r "$newest_reqs"' in script
    assert '"$uv" pip install --quiet --python .venv-newest/bin/python --no-deps -e .' in script
    # the locked pass in two processes, the rest in the foreground, its status kept, and the real
    # agent apps (the rest of the suite) the last command of a background job; the newest pass's
    # tests the last command of the background job that installs it. `wait` collects each
    # background job's status; any of the three fails the run
    assert len(re.findall(r"^run_tests\b[^\n]*\|\| locked=\$\?$", script, re.M)) == 1
    assert re.search(r'^run_tests -m "not clients" \|\| locked=\$\?$', script, re.M)
    assert re.search(r'^  run_tests -m clients[^\n]*\n\) >"\$clients_tests_log" 2>&1 &$', script, re.M)
    assert re.search(r'^  run_tests -m "not clients"[^\n]*\n\) >"\$newest_log" 2>&1 &$', script, re.M)
    assert 'wait "$clients_tests_pid" || clients_tests=$?' in script
    assert 'wait "$newest_pid" || newest=$?' in script
    assert '[ "$locked" -ne 0 ] || [ "$clients_tests" -ne 0 ] || [ "$newest" -ne 0 ]' in script


def test_ci_installs_with_a_hash_pinned_uv():
    script = (ROOT / ".ci" / "run").read_text()
    assert ".venv-ci/bin/python -m pip install --quiet --require-hashes -r .ci/tools.lock" in script
    lock = (ROOT / ".ci" / "tools.lock").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", lock, re.M)
    assert [name for name, _ in pins] == ["uv"]
    # a hash for each file of the release, the manylinux x86_64 wheel this machine takes among them
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", lock)) >= 10
    # every install of the project's venvs goes through it, none through pip
    assert not re.search(r"\.venv(-newest)?/bin/python -m pip install|^python -m pip install", script, re.M)


def test_ci_writes_and_reuses_bytecode_whatever_the_machine_says():
    script = (ROOT / ".ci" / "run").read_text()
    unset = script.index("\nunset PYTHONDONTWRITEBYTECODE\n")
    assert unset < script.index("python3 -m venv") and unset < script.index("python3 -c")


def test_ci_installs_the_browser_beside_the_venvs_and_runs_the_ui_test_after_it():
    script = (ROOT / ".ci" / "run").read_text()
    # a background job from the start, not a step between the installs and the tests
    assert re.search(r'^  bash \.ci/install-browser >"\$browser_log" 2>&1 \|\| status=\$\?$', script, re.M)
    assert script.index(".ci/install-browser") < script.index("python3 -m venv .venv\n")
    # each pass that runs the UI test (both `not clients` passes) waits for it first
    newest = script[script.index("newest_log=$(mktemp)") :]
    assert newest.index("await_browser") < newest.index('run_tests -m "not clients"')
    assert re.search(r'^await_browser\nstamp "locked: the rest"\nlocked=0\nrun_tests -m "not clients"', script, re.M)


def _job_functions() -> str:
    script = (ROOT / ".ci" / "run").read_text()
    return "\n".join(
        re.search(rf"^{name}\(\) \{{.*?^\}}$|^{name}\(\) \{{[^\n]*\}}$", script, re.M | re.S).group(0)
        for name in ("job_status", "finish_job", "await_job")
    )


@pytest.mark.parametrize("status", [0, 1, 3])
def test_ci_reads_a_sibling_jobs_status_once_it_ended(status):
    # the job ends after the reader started waiting: the reader gets its status, not a guess
    run = subprocess.run(
        ["bash", "-c", _job_functions() + f"""
f=$(job_status)
( sleep 0.2; finish_job "$f" {status} ) &
await_job "$f"; echo "status=$?"
rm -f "$f"
"""],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"status={status}"
