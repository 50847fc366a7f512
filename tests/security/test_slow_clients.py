"""Slow and stuck clients hold nothing for long: slowloris heads and idle connections are closed
after `header_timeout_seconds`, a client that stops reading loses its connection after
`write_timeout_seconds` and the upstream call with it, an upstream's `total_seconds` ends its
connection even while the gateway is blocked writing to such a client, and connections past
`max_connections` get a 503 in their dialect's envelope (or, past twice the cap, are closed at
once) instead of exhausting the process's descriptors."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket

import orjson

from gateway.server import AcceptErrorLog
from gateway.simulators.base import Fault, Reply
from tests.security.conftest import HANG_GUARD, USER, Gateway, eventually, read_until_closed, serving

HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


def _server(**keys: object):
    def adjust(config: dict) -> None:
        config["server"].update(keys)

    return adjust


async def _drip_until_closed(gateway: Gateway) -> bool:
    """A slowloris client: a request head that never ends, one header line every 50 ms. True
    once the gateway closes the connection (bounded: 600 lines, 30 s)."""
    reader, writer = await gateway.connect()
    try:
        writer.write(HEAD)
        for _ in range(600):
            if reader.at_eof():
                return True
            writer.write(b"X-Drip: 1\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
        return False
    except ConnectionError:
        return True
    finally:
        writer.close()


async def test_slowloris_heads_and_idle_connections_are_closed():
    async with serving(_server(header_timeout_seconds=0.5)) as gateway:
        idle_reader, idle_writer = await gateway.connect()  # says nothing at all
        closed = await asyncio.gather(*(_drip_until_closed(gateway) for _ in range(20)))
        assert all(closed)
        assert await read_until_closed(idle_reader) == b""
        idle_writer.close()
        await gateway.serves_normally()


def _stalled_stream(frames_before_stall: int) -> Fault:
    """An answer of 64 KiB deltas: several MiB are sent (more than the kernel buffers between
    the gateway and a client that does not read), then the provider stalls with the stream open."""
    text = "x" * (64 * 1024 * (frames_before_stall + 8))
    return Fault(
        after_events=frames_before_stall,
        mid_stream="stall",
        stall_seconds=600,
        reply=Reply(text=text, chunk_size=64 * 1024),
    )


async def _client_that_never_reads(gateway: Gateway) -> socket.socket:
    """Sends a streamed request and never reads a byte of the answer."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window, set before connecting
    sock.setblocking(False)
    await loop.sock_connect(sock, (gateway.host, gateway.port))
    body = orjson.dumps({"model": "openai-chat", "messages": USER, "stream": True})
    await loop.sock_sendall(sock, HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return sock


async def test_a_client_that_stops_reading_loses_its_connection_and_its_upstream_call():
    async with serving(_server(write_timeout_seconds=0.5)) as gateway:
        upstream = gateway.hub.states["openai_chat"]
        upstream.push(_stalled_stream(200))
        sock = await _client_that_never_reads(gateway)
        try:
            # the gateway gives up on the client, which cancels the upstream call mid-stream
            await eventually(lambda: upstream.closed_early == 1)
            await eventually(lambda: gateway.sample("gateway_inflight_requests") == 0)
            labels = {"ingress": "chat_completions", "model": "openai-chat", "provider": "openai-chat"}
            assert gateway.sample("gateway_requests_total", outcome="cancelled", **labels) == 1
        finally:
            sock.close()
        await gateway.serves_normally()


async def test_a_client_that_stops_reading_stops_the_upstream_read_too():
    """Backpressure: the gateway pulls the answer no faster than the client reads it. With a
    client that reads nothing, the provider's writes block (the gateway stopped reading its
    socket) long before the answer's end, and what the gateway buffers for the client stays
    within its connection's high-water mark and one relayed chunk; the client leaving then
    cancels the upstream call."""
    frame = 16 * 1024
    frames = 24 * 64  # 24 MiB: more than every kernel buffer on the way can hold
    async with serving(_server(write_timeout_seconds=600.0)) as gateway:
        upstream = gateway.hub.states["openai_chat"]
        upstream.push(Reply(text="x" * (frame * frames), chunk_size=frame))
        sock = await _client_that_never_reads(gateway)
        try:
            server = gateway.runner.server
            await eventually(
                lambda: upstream.throttled_streams == 1 and any(c.writing_paused for c in server.connections)
            )
            (connection,) = server.connections
            assert connection.transport is not None
            high_water = connection.transport.get_write_buffer_limits()[1]
            # the relay waits at the high-water mark: one write (an event of `frame` characters,
            # in chat's framing) at most beyond it
            assert connection.transport.get_write_buffer_size() <= high_water + 2 * frame
            sent = upstream.frames_sent
            assert sent < frames and upstream.closed_early == 0
        finally:
            sock.close()
        await eventually(lambda: upstream.closed_early == 1)  # the upstream call was cancelled
        await eventually(lambda: gateway.sample("gateway_inflight_requests") == 0)
        assert upstream.frames_sent < frames  # the rest of the answer was never produced
        labels = {"ingress": "chat_completions", "model": "openai-chat", "provider": "openai-chat"}
        assert gateway.sample("gateway_requests_total", outcome="cancelled", **labels) == 1
        await gateway.serves_normally()


async def test_the_upstream_total_timeout_holds_while_the_gateway_is_blocked_on_a_client():
    def adjust(config: dict) -> None:
        config["server"]["write_timeout_seconds"] = 600.0  # the client is never given up on here
        config["providers"]["openai-chat"]["timeouts"] = {"total_seconds": 2.0}

    async with serving(adjust) as gateway:
        upstream = gateway.hub.states["openai_chat"]
        upstream.push(_stalled_stream(200))
        sock = await _client_that_never_reads(gateway)
        try:
            # 2 s after the request the upstream connection is closed, though the gateway is still
            # waiting for the client to read (600 s)
            await eventually(lambda: upstream.closed_early == 1)
        finally:
            sock.close()
        await eventually(lambda: gateway.sample("gateway_inflight_requests") == 0)
        await gateway.serves_normally()


async def _request_on_new_connection(gateway: Gateway, path: str = "/v1/chat/completions") -> bytes:
    reader, writer = await gateway.connect()
    body = orjson.dumps({"model": "claude", "messages": USER})
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    answer = await read_until_closed(reader)
    writer.close()
    return answer


async def test_connections_past_the_cap_are_refused_in_the_envelope_then_closed():
    async with serving(_server(max_connections=4)) as gateway:
        server = gateway.runner.server
        held = [await gateway.connect() for _ in range(4)]
        await eventually(lambda: server.open_connections == 4)

        answer = await _request_on_new_connection(gateway)
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0] == b"HTTP/1.1 503 Service Unavailable"
        assert b"Retry-After: 1" in lines and b"Connection: close" in lines
        assert orjson.loads(body)["error"]["code"] == "over_capacity"
        answer = await _request_on_new_connection(gateway, "/v1/messages")
        assert orjson.loads(answer.partition(b"\r\n\r\n")[2]) == {
            "type": "error",
            "error": {
                "type": "overloaded_error",
                "message": "the gateway has too many open connections; retry shortly",
            },
        }
        assert gateway.hub.states["anthropic"].requests == []
        labels = {"model": "unknown", "provider": "none", "outcome": "refused"}
        assert gateway.sample("gateway_requests_total", ingress="chat_completions", **labels) == 1

        # an over-capacity connection that sends nothing is closed; past twice the cap, at once
        await eventually(lambda: server.open_connections == 4)
        over = [await gateway.connect() for _ in range(4)]
        await eventually(lambda: server.open_connections == 8)
        reader, writer = await gateway.connect()
        assert await read_until_closed(reader) == b""
        writer.close()
        for over_reader, over_writer in over:
            assert await read_until_closed(over_reader) == b""
            over_writer.close()

        for _, writer in held:
            writer.close()
        await eventually(lambda: server.open_connections == 0)
        await gateway.serves_normally()


async def test_accept_failures_are_logged_once_per_interval_with_a_count(caplog):
    loop = asyncio.get_running_loop()
    limiter = AcceptErrorLog(interval=3600)
    limiter.install(loop)
    try:
        for _ in range(10_000):  # what an exhausted descriptor table produced in seconds
            loop.call_exception_handler(
                {
                    "message": "socket.accept() out of system resource",
                    "exception": OSError(errno.EMFILE, "Too many open files"),
                }
            )
        other = {"message": "something else", "exception": RuntimeError("kept")}
        loop.call_exception_handler(other)
    finally:
        limiter.uninstall()
    accept_lines = [r for r in caplog.records if "accept() failed" in r.getMessage()]
    assert len(accept_lines) == 1 and accept_lines[0].levelno == logging.ERROR
    assert not accept_lines[0].exc_info  # one line, no traceback
    assert limiter.suppressed == 9_999
    assert any("something else" in r.getMessage() for r in caplog.records)  # other errors pass through
    assert loop.get_exception_handler() is None


async def test_a_flood_of_idle_connections_does_not_exhaust_descriptors(tmp_path):
    """`gateway serve` in a process limited to 256 descriptors, under 300 idle connections: it
    keeps the connections its cap allows, closes the rest, answers a 503 meanwhile, never fails
    an accept(), and serves normally once the flood goes."""
    from tests.security.serve_process import gateway_process

    async with gateway_process(tmp_path, file_limit=256, header_timeout_seconds=60) as process:
        flood = []
        for _ in range(300):
            flood.append(await asyncio.open_connection("127.0.0.1", process.port))

        # (256 - 64 reserved - 128 for one accept() burst) // 2 = 32 connections are kept; the
        # rest are closed
        async def closed(reader: asyncio.StreamReader) -> bool:
            try:
                async with asyncio.timeout(HANG_GUARD):
                    return await reader.read() == b""
            except ConnectionError:
                return True

        results = await asyncio.gather(*(closed(reader) for reader, _ in flood[32:]))
        assert all(results)
        assert not any(reader.at_eof() for reader, _ in flood[:32])
        answer = await _request_on_new_connection(process)
        assert answer.startswith(b"HTTP/1.1 503 ") and b'"over_capacity"' in answer
        for _, writer in flood:
            writer.close()
        # the gateway notices the closed connections in its own time
        async with asyncio.timeout(HANG_GUARD):
            refused = True
            while refused:
                refused = (await _request_on_new_connection(process)).startswith(b"HTTP/1.1 503 ")
        await process.serves_normally()
        stderr = await process.stop()
    assert "Traceback" not in stderr and "accept() failed" not in stderr, stderr[-2000:]
    assert "serving at most 32 connections, not 1024" in stderr
