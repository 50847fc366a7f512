"""`gateway serve` as a process: SIGTERM stops accepting, lets in-flight streams finish within the
grace period (and no longer), writes the access log as JSON lines, and exits 0."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import orjson

from gateway.demo import FAMILIES
from gateway.simulators.base import Fault, Reply, SimulatorHub, free_port
from tests.ops.conftest import JSON, USER

ROOT = Path(__file__).resolve().parents[2]
KEY = "serve-test-provider-key-01234"
HANG_GUARD = 60  # seconds; only ever reached when something is broken


def write_config(
    path: Path, hub: SimulatorHub, port: int, grace: float, server: Mapping[str, object] | None = None
) -> None:
    lines = [
        "[server]",
        'host = "127.0.0.1"',
        f"port = {port}",
        f"shutdown_grace_seconds = {grace}",
        'log_level = "info"',
        *(f"{key} = {orjson.dumps(value).decode()}" for key, value in (server or {}).items()),
    ]
    for name, kind, model, _ in FAMILIES:
        lines += [
            f'[providers."{name}"]',
            f'kind = "{kind}"',
            f'base_url = "{hub.base_url(kind)}"',
            'api_key_env = "SERVE_TEST_KEY"',
            f'[models."{name}"]',
            f'targets = [{{ provider = "{name}", model = "{model}" }}]',
        ]
    path.write_text("\n".join(lines) + "\n")


class Gateway:
    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process = process
        self.url = url
        self.stderr = b""

    async def finish(self) -> int:
        assert self.process.stderr is not None
        self.stderr = await asyncio.wait_for(self.process.stderr.read(), HANG_GUARD)
        return await asyncio.wait_for(self.process.wait(), HANG_GUARD)


@asynccontextmanager
async def gateway_process(
    tmp_path: Path,
    hub: SimulatorHub,
    grace: float,
    extra_config: str = "",
    args: Sequence[str] = (),
    *,
    server: Mapping[str, object] | None = None,
    file_limit: int | None = None,
    key: str = KEY,
) -> AsyncIterator[Gateway]:
    """`extra_config`: TOML appended to the config (e.g. a [store] table); `args`: more flags;
    `server`: more [server] keys; `file_limit`: the process's open-file limit (soft and hard)."""
    port = free_port()
    config = tmp_path / "gateway.toml"
    write_config(config, hub, port, grace, server)
    with config.open("a") as f:
        f.write(extra_config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env["SERVE_TEST_KEY"] = key

    def limit_files() -> None:  # in the child, before exec
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (file_limit, file_limit))

    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "serve", "--config", str(config), *args,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        preexec_fn=limit_files,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), HANG_GUARD)
        assert line.decode().strip() == f"gateway listening on http://127.0.0.1:{port}"
        yield Gateway(process, f"http://127.0.0.1:{port}")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def wait_for_upstream_request(hub: SimulatorHub, kind: str) -> None:
    for _ in range(HANG_GUARD * 100):
        if hub.states[kind].requests:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the request never reached the simulator")


async def wait_until_refused(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    for _ in range(HANG_GUARD * 100):
        try:
            _, writer = await asyncio.open_connection(host, int(port))
        except (ConnectionRefusedError, ConnectionResetError):
            return  # refused, or reset while the listening socket closed
        writer.close()
        await asyncio.sleep(0.01)
    raise AssertionError("the gateway kept accepting connections after SIGTERM")


async def stream_text(http: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    body = orjson.dumps({"model": "claude", "messages": USER, "stream": True})
    async with http.post(url + "/v1/chat/completions", data=body, headers=JSON) as resp:
        text = []
        for frame in (await resp.read()).decode().split("\n\n"):
            data = frame.removeprefix("data: ")
            if data.startswith("{"):
                event = orjson.loads(data)
                text += [c["delta"].get("content") or "" for c in event.get("choices", ())]
        return resp.status, "".join(text)


async def test_sigterm_drains_an_in_flight_stream_then_exits_zero(tmp_path):
    answer = "A long answer that is still being generated when the gateway is told to stop. " * 4
    async with SimulatorHub(api_key=KEY) as hub, aiohttp.ClientSession() as http:
        async with gateway_process(tmp_path, hub, grace=30) as gateway:
            # the provider takes a moment before its first byte: the request is in flight
            hub.states["anthropic"].push(Fault(delay=1.0, reply=Reply(text=answer, chunk_size=7)))
            in_flight = asyncio.create_task(stream_text(http, gateway.url))
            await wait_for_upstream_request(hub, "anthropic")
            gateway.process.send_signal(signal.SIGTERM)
            await wait_until_refused(gateway.url)
            status, text = await asyncio.wait_for(in_flight, HANG_GUARD)
            assert (status, text) == (200, answer)
            assert await gateway.finish() == 0
    stderr = gateway.stderr.decode()
    assert "draining in-flight requests" in stderr
    access = [orjson.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert [(a["model"], a["provider"], a["outcome"]) for a in access] == [("claude", "claude", "ok")]
    assert KEY not in stderr


async def test_a_stream_longer_than_the_grace_period_is_cut_and_the_process_still_exits(tmp_path):
    async with SimulatorHub(api_key=KEY) as hub, aiohttp.ClientSession() as http:
        async with gateway_process(tmp_path, hub, grace=0.5) as gateway:
            # commits (first text delta), then stalls far longer than the grace period
            stall = Fault(
                after_events=4, mid_stream="stall", stall_seconds=HANG_GUARD * 2, reply=Reply(text="x" * 200)
            )
            hub.states["anthropic"].push(stall)
            in_flight = asyncio.create_task(stream_text(http, gateway.url))
            await wait_for_upstream_request(hub, "anthropic")
            gateway.process.send_signal(signal.SIGTERM)
            assert await gateway.finish() == 0  # within the hang guard, long before the stall ends
            try:
                status, text = await asyncio.wait_for(in_flight, HANG_GUARD)
            except aiohttp.ClientError:
                pass  # the connection was closed under the client: the stream did not complete
            else:
                assert status == 200 and text != "x" * 200


def test_serving_tunes_the_garbage_collector():
    import gc

    from gateway.serve import GC_THRESHOLDS, tune_garbage_collector

    before = gc.get_threshold()
    try:
        tune_garbage_collector()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 0  # what startup built is out of the collector's sight
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
