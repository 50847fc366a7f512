"""`gateway serve --workers N`: N processes on one port, requests land on every one of them, a
scrape of any worker reports every worker's counts, continuity sealed by one worker opens on
another, SIGTERM drains every worker, and the memory store is refused with several workers.

Which worker serves a connection is read from /proc (the process holding the server side of the
client's TCP connection), so the gateway needs no debugging surface for it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import orjson
import pytest

from bench.rig import children
from gateway.cli import main
from gateway.simulators.base import Fault, Reply, SimulatorHub, free_port
from tests.ops.conftest import JSON, USER
from tests.ops.test_metrics_contract import scrape, values
from tests.ops.test_serve import HANG_GUARD, KEY, Gateway, gateway_process, wait_for_upstream_request

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)")

THINKING = '[models.thinking]\ntargets = [{ provider = "claude", model = "claude-sonnet-4-5", thinking_budget = 2048 }]\n'


def _store(tmp_path: Path) -> str:
    return f'[store]\nbackend = "sqlite"\npath = "{tmp_path / "continuity.db"}"\n'


@asynccontextmanager
async def workers(
    tmp_path: Path, hub: SimulatorHub, count: int = 2, grace: float = 30
) -> AsyncIterator[Gateway]:
    extra = _store(tmp_path) + THINKING
    async with gateway_process(tmp_path, hub, grace, extra, ["--workers", str(count)]) as gateway:
        yield gateway


def _socket_inode(server_port: int, client_port: int) -> int | None:
    """The inode of the server side of the loopback connection client_port -> server_port."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], int(fields[9])
            if (
                int(local.rsplit(":", 1)[1], 16) == server_port
                and int(remote.rsplit(":", 1)[1], 16) == client_port
            ):
                return inode
    return None


def serving_process(supervisor: int, server_port: int, client_port: int) -> int:
    inode = _socket_inode(server_port, client_port)
    assert inode is not None, "the connection is not in /proc/net/tcp"
    target = f"socket:[{inode}]"
    for pid in children(supervisor):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return pid
            except OSError:
                continue
    raise AssertionError(f"no worker of {supervisor} holds {target}")


class Connection:
    """One keep-alive client connection, and the worker process at its other end."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        # a known local port: the connection's row in /proc/net/tcp
        self.port = free_port()
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1, local_addr=("127.0.0.1", self.port)), headers=JSON
        )
        self.worker = 0

    async def request(
        self, method: str, path: str, body: object = None, locate: bool = True
    ) -> tuple[int, bytes]:
        """`locate`: check which worker answered (not after SIGTERM: the worker may have closed
        the connection already)."""
        data = None if body is None else orjson.dumps(body)
        async with self.http.request(method, self.gateway.url + path, data=data) as resp:
            status, body = resp.status, await resp.read()
        if not locate:
            return status, body
        server_port = int(self.gateway.url.rsplit(":", 1)[1])
        worker = serving_process(self.gateway.process.pid, server_port, self.port)
        assert self.worker in (0, worker), "a keep-alive connection moved to another worker"
        self.worker = worker
        return status, body

    async def close(self) -> None:
        await self.http.close()


async def one_connection_per_worker(gateway: Gateway, count: int) -> list[Connection]:
    """Open connections until `count` different workers hold one (the kernel picks the worker of
    each new connection; 200 tries make missing one of two workers a 2**-199 event)."""
    by_worker: dict[int, Connection] = {}
    for _ in range(200):
        conn = Connection(gateway)
        status, _ = await conn.request("GET", "/healthz")
        assert status == 200
        if conn.worker in by_worker:
            await conn.close()
        else:
            by_worker[conn.worker] = conn
        if len(by_worker) == count:
            return list(by_worker.values())
    raise AssertionError(f"connections reached only {len(by_worker)} of {count} workers")


def requests_total(body: bytes) -> float:
    return sum(values(scrape(body.decode())["gateway_requests_total"][1], "gateway_requests_total").values())


async def test_two_workers_serve_one_port_and_each_scrape_counts_both(tmp_path):
    async with SimulatorHub(api_key=KEY) as hub, workers(tmp_path, hub) as gateway:
        a, b = await one_connection_per_worker(gateway, 2)
        try:
            assert a.worker != b.worker
            for conn, n in ((a, 3), (b, 2)):
                for _ in range(n):
                    status, _ = await conn.request(
                        "POST", "/v1/chat/completions", {"model": "claude", "messages": USER}
                    )
                    assert status == 200
            for conn in (a, b):  # each worker's scrape: its own 3 (or 2) requests and the other's
                status, body = await conn.request("GET", "/metrics")
                assert status == 200
                assert requests_total(body) == 5
                families = scrape(body.decode())
                available = values(families["gateway_target_available"][1], "gateway_target_available")
                assert dict(available)[(("model", "claude"), ("provider", "claude"))] == 1
                assert dict(
                    values(families["gateway_inflight_requests"][1], "gateway_inflight_requests")
                ) == {(): 0}
        finally:
            await a.close()
            await b.close()
        gateway.process.send_signal(signal.SIGTERM)
        assert await gateway.finish() == 0
    stderr = gateway.stderr.decode()
    assert stderr.count("draining in-flight requests") == 1
    assert KEY not in stderr


async def test_continuity_sealed_by_one_worker_opens_on_the_other(tmp_path):
    async with SimulatorHub(api_key=KEY) as hub, workers(tmp_path, hub) as gateway:
        a, b = await one_connection_per_worker(gateway, 2)
        try:
            status, body = await a.request(
                "POST", "/v1/chat/completions", {"model": "thinking", "messages": USER}
            )
            assert status == 200
            message = orjson.loads(body)["choices"][0]["message"]
            assert message["reasoning_details"], "the answer carries sealed continuity"
            turn = [*USER, message, {"role": "user", "content": "And times eight?"}]
            status, body = await b.request(
                "POST", "/v1/chat/completions", {"model": "thinking", "messages": turn}
            )
            assert status == 200, body
            status, body = await b.request("GET", "/metrics")
            ignored = scrape(body.decode()).get("gateway_ignored_continuity_tokens_total")
            assert (
                ignored is None
                or sum(values(ignored[1], "gateway_ignored_continuity_tokens_total").values()) == 0
            )
            assert hub.states["anthropic"].verified_tokens >= 1  # the signature reached its issuer
        finally:
            await a.close()
            await b.close()
        gateway.process.send_signal(signal.SIGTERM)
        assert await gateway.finish() == 0


async def stream_on(conn: Connection) -> tuple[int, str]:
    status, body = await conn.request(
        "POST", "/v1/chat/completions", {"model": "claude", "messages": USER, "stream": True}, locate=False
    )
    text = []
    for frame in body.decode().split("\n\n"):
        data = frame.removeprefix("data: ")
        if data.startswith("{"):
            text += [c["delta"].get("content") or "" for c in orjson.loads(data).get("choices", ())]
    return status, "".join(text)


async def test_sigterm_drains_an_in_flight_stream_on_every_worker(tmp_path):
    answer = "An answer still being generated when the gateway is told to stop. " * 3
    async with SimulatorHub(api_key=KEY) as hub, workers(tmp_path, hub) as gateway:
        conns = await one_connection_per_worker(gateway, 2)
        try:
            # the provider takes a moment before its first byte: both requests are in flight
            hub.states["anthropic"].push(
                *(Fault(delay=1.5, reply=Reply(text=answer, chunk_size=7)) for _ in conns)
            )
            in_flight = [asyncio.create_task(stream_on(conn)) for conn in conns]
            await wait_for_upstream_request(hub, "anthropic")
            for _ in range(HANG_GUARD * 100):
                if len(hub.states["anthropic"].requests) == len(conns):
                    break
                await asyncio.sleep(0.01)
            gateway.process.send_signal(signal.SIGTERM)
            results = await asyncio.wait_for(asyncio.gather(*in_flight), HANG_GUARD)
            assert results == [(200, answer)] * len(conns)
            assert await gateway.finish() == 0
        finally:
            for conn in conns:
                await conn.close()
    assert gateway.stderr.decode().count("gateway stopped") == 2  # each worker drained and closed


def test_several_workers_with_the_memory_store_are_refused(tmp_path, capsys):
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[store]\nbackend = "memory"\n[providers.p]\nkind = "openai_chat"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "P_KEY"\n'
    )
    assert main(["serve", "--config", str(config), "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "server.workers: 2 worker processes need a continuity store they can share" in err
    assert 'backend = "sqlite" or "redis"' in err and "(from --workers)" in err


def test_workers_refuse_a_port_another_process_listens_on(tmp_path, capsys):
    """SO_REUSEPORT would let the workers join another listener (an older gateway) silently."""
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'[store]\nbackend = "sqlite"\npath = "{tmp_path / "c.db"}"\n[providers.p]\nkind = "openai_chat"\n'
        'base_url = "http://127.0.0.1:9/v1"\napi_key_env = "P_KEY"\n'
    )
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert main(["serve", "--config", str(config), "--workers", "2", "--port", str(port)]) == 1
    assert "Address already in use" in capsys.readouterr().err


def _alive(pid: int) -> bool:
    """Not yet reaped by the supervisor (a zombie leader's threads may still hold its sockets)."""
    return Path(f"/proc/{pid}").exists()


async def _wait_until_dead(pid: int) -> None:
    for _ in range(HANG_GUARD * 100):
        if not _alive(pid):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"worker {pid} did not die")


async def _wait_for_workers(supervisor: int, count: int, exclude: int = 0) -> list[int]:
    for _ in range(HANG_GUARD * 100):
        found = [pid for pid in children(supervisor) if pid != exclude]
        if len(found) == count:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"the supervisor did not get back to {count} workers")


async def _once_serving(gateway: Gateway, count: int) -> list[Connection]:
    """One connection per worker, once every worker accepts: a restarted worker exists before it
    has imported the app and accepts connections (seconds on a loaded machine)."""
    for _ in range(HANG_GUARD * 10):
        try:
            return await one_connection_per_worker(gateway, count)
        except AssertionError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"connections never reached all {count} workers")


async def test_a_killed_worker_is_restarted_counted_and_the_gateway_keeps_serving(tmp_path):
    async with SimulatorHub(api_key=KEY) as hub, workers(tmp_path, hub) as gateway:
        a, b = await one_connection_per_worker(gateway, 2)
        killed = a.worker
        await a.close()
        try:
            os.kill(killed, signal.SIGKILL)
            # until it is gone, a connection the kernel put in its backlog is reset (SO_REUSEPORT)
            await _wait_until_dead(killed)
            for _ in range(20):  # served by the survivor meanwhile, on fresh connections
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
                    async with http.post(
                        gateway.url + "/v1/chat/completions",
                        data=orjson.dumps({"model": "claude", "messages": USER}),
                        headers={"Content-Type": "application/json"},
                    ) as resp:
                        assert resp.status == 200
            assert gateway.process.returncode is None
            await _wait_for_workers(gateway.process.pid, 2, exclude=killed)
            c, d = await _once_serving(gateway, 2)  # the restarted worker serves too
            try:
                status, body = await c.request("GET", "/metrics")
                assert status == 200
                restarts = values(
                    scrape(body.decode())["gateway_worker_restarts_total"][1], "gateway_worker_restarts_total"
                )
                assert dict(restarts) == {(): 1}
            finally:
                await c.close()
                await d.close()
        finally:
            await b.close()
        gateway.process.send_signal(signal.SIGTERM)
        assert await gateway.finish() == 0
    stderr = gateway.stderr.decode()
    assert f"worker 0 (pid {killed})" in stderr or f"worker 1 (pid {killed})" in stderr
    assert "restarting it in 0.5s" in stderr


async def test_a_continuation_sent_at_once_finds_its_answer_on_any_worker(tmp_path):
    async with SimulatorHub(api_key=KEY) as hub, workers(tmp_path, hub) as gateway:
        previous = None
        for n in range(40):  # each turn on a new connection: the kernel picks its worker
            body = {"model": "claude", "input": f"turn {n}", "stream": n % 2 == 1}
            if previous:
                body["previous_response_id"] = previous
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
                async with http.post(
                    gateway.url + "/v1/responses",
                    data=orjson.dumps(body),
                    headers={"Content-Type": "application/json"},
                ) as resp:
                    raw = await resp.read()
                    assert resp.status == 200, raw
            if n % 2:
                done = [line for line in raw.decode().splitlines() if '"response.completed"' in line]
                previous = orjson.loads(done[0].removeprefix("data: "))["response"]["id"]
            else:
                previous = orjson.loads(raw)["id"]
        assert all(
            f"turn {n}" in orjson.dumps(hub.states["anthropic"].requests[-1].body).decode() for n in range(40)
        )
        gateway.process.send_signal(signal.SIGTERM)
        assert await gateway.finish() == 0
