"""A minimal OpenAI Chat Completions upstream for the bench: it parses the request (as any upstream
must) and answers at once, without validating anything, so that what the bench measures is the
gateway and not the upstream. The strict simulators (gateway/simulators/) judge correctness; this
stub only has to be cheap. It is HTTP/1.1 on an asyncio protocol parsed by llhttp (httptools),
not aiohttp's server: it shares a core with the load generator, and aiohttp's ~60 us a request
there made the rig, not the relay under test, the limit of the c=64 figure (bench/README.md).

What it answers is chosen by the model name, so one stub process serves every scenario and the
same name works direct and through the gateway (which forwards the target's upstream model):

    stub[-d<ms>][-n<chunks>][-i<ms>][-tool]

    -d20    wait 20 ms before the response headers (default 0, or --delay)
    -n64    stream 64 content chunks (default 4, or --chunks)
    -i10    wait 10 ms between streamed chunks (default 0, or --interval)
    -tool   answer with one tool call instead of text (the agent-loop sweep)

    python bench/stub.py --port 8790 [--delay MS] [--chunks N] [--interval MS]

Prints `stub listening on http://127.0.0.1:PORT` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import socket
import time
from dataclasses import dataclass
from email.utils import formatdate

import httptools
import orjson

PATH = "/v1/chat/completions"
CONNECTIONS = "/bench/connections"  # GET: {"opened": N, "closed": N} since the stub started
_SPEC = re.compile(r"-(d|n|i)(\d+)|-(tool)")
TOOL_NAME = "tool_00"  # the first of the sweep's 20 tools (bench/workloads.py)


@dataclass(frozen=True, slots=True)
class Behaviour:
    delay: float  # seconds before the headers
    chunks: int
    interval: float  # seconds between chunks
    tool: bool
    # pre-rendered: the whole JSON body, and the SSE frames (first, one per content chunk, last)
    body: bytes
    frames: tuple[bytes, ...]


def _frame(payload: dict) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _render(model: str, delay: float, chunks: int, interval: float, tool: bool) -> Behaviour:
    head = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": model}
    usage = {"prompt_tokens": 10, "completion_tokens": max(chunks, 1), "total_tokens": 10 + max(chunks, 1)}
    if tool:
        call = {
            "id": "call_stub",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": '{"path": "src/main.py"}'},
        }
        message: dict = {"role": "assistant", "content": None, "tool_calls": [call]}
        deltas = [{"tool_calls": [{"index": 0, **call}]}]
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": "tok " * chunks}
        deltas = [{"content": "tok "} for _ in range(chunks)]
        finish = "stop"
    body = orjson.dumps(
        {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
    )
    frames = [_frame({**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    frames += [_frame({**head, "choices": [{"index": 0, "delta": d}]}) for d in deltas]
    frames.append(_frame({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    frames.append(_frame({**head, "choices": [], "usage": usage}) + b"data: [DONE]\n\n")
    return Behaviour(delay, chunks, interval, tool, body, tuple(frames))


def _chunk(frame: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(frame), frame)


# the headers aiohttp's server sent for the stub (until the ninth round of issue 23), so that a
# relay reads answers of the same shape: the type, the framing, Date and Server
_WHOLE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%b\r\n%b"
_STREAM = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n%b\r\n"
_SERVER = b"Server: Python/3.11 bench-stub\r\n"
_END = b"0\r\n\r\n"
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
_BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Stub:
    """What the stub answers (by model name), and the connections it has accepted and lost."""

    def __init__(self, delay_ms: float = 0, chunks: int = 4, interval_ms: float = 0) -> None:
        self.defaults = (delay_ms / 1000, chunks, interval_ms / 1000)
        self._cache: dict[str, Behaviour] = {}
        self.opened = 0
        self.closed = 0
        self._second = 0
        self._dated = b""

    def dated(self) -> bytes:
        """The Date and Server header lines, the date rendered once a second."""
        now = int(time.time())
        if now != self._second:
            self._second = now
            self._dated = b"Date: %b\r\n%b" % (formatdate(now, usegmt=True).encode(), _SERVER)
        return self._dated

    def behaviour(self, model: str) -> Behaviour:
        found = self._cache.get(model)
        if found is None:
            delay, chunks, interval = self.defaults
            tool = False
            for letter, value, flag in _SPEC.findall(model):
                if flag:
                    tool = True
                elif letter == "d":
                    delay = int(value) / 1000
                elif letter == "n":
                    chunks = int(value)
                else:
                    interval = int(value) / 1000
            found = self._cache[model] = _render(model, delay, chunks, interval, tool)
        return found

    def protocol(self) -> StubConnection:
        return StubConnection(self)

    async def serve(self, host: str, port: int) -> asyncio.Server:
        """Listening (port 0: any free port; the server's socket tells which)."""
        return await asyncio.get_running_loop().create_server(self.protocol, host, port, backlog=4096)


class StubConnection(asyncio.Protocol):
    """One client connection: HTTP/1.1 keep-alive parsed by llhttp, one request at a time (as
    every client of the bench sends them). The answers are pre-rendered bytes; the upstream delay
    and the gap between streamed chunks are loop timers, not tasks."""

    def __init__(self, stub: Stub) -> None:
        self.stub = stub
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.parts: list[bytes] = []
        self.keep = True
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport
        self.stub.opened += 1
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # each streamed chunk leaves when written: with Nagle's algorithm a small write waits
            # for the ACK of the previous one, and the client's delayed ACK makes that a 40 ms stall
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.stub.closed += 1
        if self.timer is not None:
            self.timer.cancel()
        self.transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self._write(_BAD)
            self._close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        url, self.url = self.url, b""
        body = b"".join(self.parts)
        self.parts.clear()
        self.keep = self.parser.should_keep_alive()
        if url == CONNECTIONS.encode() and self.parser.get_method() == b"GET":
            counts = orjson.dumps({"opened": self.stub.opened, "closed": self.stub.closed})
            self._whole(_WHOLE % (len(counts), self.stub.dated(), counts))
            return
        if url != PATH.encode() or self.parser.get_method() != b"POST":
            self._whole(_NOT_FOUND)
            return
        request = orjson.loads(body)  # parsed, as any upstream must
        b = self.stub.behaviour(str(request.get("model", "stub")))
        loop = asyncio.get_running_loop()
        if not request.get("stream"):
            answer = _WHOLE % (len(b.body), self.stub.dated(), b.body)
            if b.delay:
                self.timer = loop.call_later(b.delay, self._whole, answer)
            else:
                self._whole(answer)
        elif b.delay:
            self.timer = loop.call_later(b.delay, self._stream, b, 0)
        else:
            self._stream(b, 0)

    def _whole(self, answer: bytes) -> None:
        self.timer = None
        self._write(answer)
        if not self.keep:
            self._close()

    def _stream(self, b: Behaviour, n: int) -> None:
        """Frames from `n` on: the role and first content chunk at once, then `interval` after
        each content chunk the next frame, and the finish and usage frames together."""
        self.timer = None
        if n == 0:
            self._write(_STREAM % self.stub.dated())
        last = len(b.frames) - 1
        while n <= last:
            self._write(_chunk(b.frames[n]) + (_END if n == last else b""))
            n += 1
            if b.interval and 1 < n < last:  # after a content chunk (frames 1..chunks)
                self.timer = asyncio.get_running_loop().call_later(b.interval, self._stream, b, n)
                return
        if not self.keep:
            self._close()

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def _serve(host: str, port: int, stub: Stub) -> None:
    server = await stub.serve(host, port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"stub listening on http://{host}:{port}", flush=True)
    await stop.wait()
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/stub.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=0, help="ms before the headers (default 0)")
    parser.add_argument("--chunks", type=int, default=4, help="streamed content chunks (default 4)")
    parser.add_argument("--interval", type=float, default=0, help="ms between chunks (default 0)")
    args = parser.parse_args()
    try:  # the rig is as fast as it can be
        import uvloop
    except ImportError:
        asyncio.run(_serve(args.host, args.port, Stub(args.delay, args.chunks, args.interval)))
    else:
        uvloop.run(_serve(args.host, args.port, Stub(args.delay, args.chunks, args.interval)))


if __name__ == "__main__":
    main()
