"""The rig's own HTTP: bench/wire.py's client against bench/stub.py's server, in process. What the
load generator sends (the same headers aiohttp's client sent), keep-alive reuse within the limit,
whole and streamed answers (each read handed over with its time), a connection the server cuts,
and the stub's answers as aiohttp's client reads them (the gateway's view is the e2e bench run)."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest

from bench import load, wire, workloads
from bench.stub import CONNECTIONS, PATH, Stub


async def _stub() -> tuple[Stub, asyncio.Server, str]:
    stub = Stub()
    server = await stub.serve("127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return stub, server, f"http://127.0.0.1:{port}"


async def test_whole_answers_reuse_one_connection():
    stub, server, origin = await _stub()
    path = load.Path("direct", origin + PATH, {"Content-Type": "application/json"})
    try:
        async with load.client(path, 4) as http:
            answers = [await path.post(http, workloads.small_body("stub")) for _ in range(5)]
        assert all(a is not None and orjson.loads(a)["choices"][0]["message"]["content"] for a in answers)
        assert stub.opened == 1 and path.errors.count == 0
    finally:
        server.close()


async def test_concurrent_requests_open_at_most_the_limit():
    stub, server, origin = await _stub()
    path = load.Path("direct", origin + PATH, {"Content-Type": "application/json"})
    try:
        done, _ = await load.throughput(path, workloads.small_body("stub-d1"), 3, 0.05)
        assert done > 0 and path.errors.count == 0
        assert stub.opened == 3
    finally:
        server.close()


async def test_the_request_carries_what_aiohttp_sent():
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    path = load.Path(
        "gateway", f"http://127.0.0.1:{port}/v1/chat/completions", {"Content-Type": "application/json"}
    )
    try:
        async with load.client(path, 1) as http:
            assert await path.post(http, b"{}", {"X-Session-Id": "s1"}) == b"ok"
    finally:
        server.close()
    head = seen[0].decode().split("\r\n")
    assert head[0] == "POST /v1/chat/completions HTTP/1.1"
    assert head[1] == f"Host: 127.0.0.1:{port}"
    names = [line.split(":")[0] for line in head[2:] if line]
    assert names == [
        "Content-Type",
        "X-Session-Id",
        "Accept",
        "Accept-Encoding",
        "User-Agent",
        "Content-Length",
    ]
    assert "Content-Length: 2" in head


async def test_a_large_body_goes_beside_its_head():
    stub, server, origin = await _stub()
    path = load.Path("direct", origin + PATH, {"Content-Type": "application/json"})
    body = orjson.dumps({"model": "stub", "messages": [{"role": "user", "content": "x" * load.JOIN_BELOW}]})
    assert type(path.request(body)) is tuple and type(path.request(b"{}")) is bytes
    try:
        async with load.client(path, 1) as http:
            assert await path.post(http, body) is not None
    finally:
        server.close()


async def test_a_stream_hands_over_every_read_with_its_time():
    stub, server, origin = await _stub()
    path = load.Path("direct", origin + PATH, {"Content-Type": "application/json"})
    try:
        times = await load.streams(path, workloads.small_body("stub-n5-i1", stream=True), 3, 5)
    finally:
        server.close()
    assert path.errors.count == 0 and times.chunks == 15
    assert len(times.first) == 3 and len(times.gaps) == 12
    assert all(gap >= 0 for gap in times.gaps) and times.worst_gap > 0  # 1 ms apart: read apart


async def test_a_wrong_chunk_count_and_a_non_200_are_errors():
    stub, server, origin = await _stub()
    path = load.Path("direct", origin + PATH, {"Content-Type": "application/json"})
    missing = load.Path("direct", origin + "/nowhere", {"Content-Type": "application/json"})
    try:
        await load.streams(path, workloads.small_body("stub-n2", stream=True), 1, 3)
        async with load.client(missing, 1) as http:
            assert await missing.post(http, b"{}") is None
    finally:
        server.close()
    assert path.errors.count == 1 and "expected 3" in path.errors.first
    assert missing.errors.count == 1 and missing.errors.first.startswith("404")


async def test_a_connection_cut_mid_answer_fails_the_request():
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    path = load.Path("gateway", f"http://127.0.0.1:{port}/x", {})
    try:
        async with load.client(path, 1) as http:
            assert await path.post(http, b"{}") is None
            with pytest.raises(wire.WireError):
                await http.exchange(path.request(b"{}"))  # the next one connects anew: cut again
    finally:
        server.close()
    assert path.errors.count == 1 and "closed" in path.errors.first


async def test_the_stub_answers_aiohttp_alike():
    """What the gateway's upstream client sees: a whole JSON answer, a chunked event stream with
    the stub's frames in order, the connection counts, a 404 elsewhere."""
    stub, server, origin = await _stub()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(origin + PATH, data=workloads.small_body("stub-tool")) as resp:
                assert resp.status == 200 and resp.content_type == "application/json"
                assert {"Date", "Server"} <= set(resp.headers)  # as aiohttp's server sent them
                whole = await resp.json()
            async with http.post(origin + PATH, data=workloads.small_body("stub-n3-i1", stream=True)) as resp:
                assert resp.status == 200 and resp.content_type == "text/event-stream"
                streamed = await resp.read()
            async with http.get(origin + CONNECTIONS) as resp:
                counts = await resp.json()
            async with http.post(origin + "/elsewhere", data=b"{}") as resp:
                assert resp.status == 404
    finally:
        server.close()
    assert whole["choices"][0]["finish_reason"] == "tool_calls"
    assert streamed == b"".join(stub.behaviour("stub-n3-i1").frames)
    assert counts == {"opened": 1, "closed": 0}
