"""A minimal OpenAI Chat Completions upstream for the bench: it parses the request (as any upstream
must) and answers at once, without validating anything, so that what the bench measures is the
gateway and not the upstream. The strict simulators (gateway/simulators/) judge correctness; this
stub only has to be cheap.

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
from dataclasses import dataclass

import orjson
from aiohttp import web

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


def _no_delay(request: web.Request) -> None:
    """Send each chunk when it is written: with Nagle's algorithm a small write waits for the ACK
    of the previous one, and the client's delayed ACK turns that into a 40 ms stall."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Stub:
    def __init__(self, delay_ms: float = 0, chunks: int = 4, interval_ms: float = 0) -> None:
        self.defaults = (delay_ms / 1000, chunks, interval_ms / 1000)
        self._cache: dict[str, Behaviour] = {}
        self.opened = 0
        self.closed = 0

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

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        b = self.behaviour(str(body.get("model", "stub")))
        if b.delay:
            await asyncio.sleep(b.delay)
        if not body.get("stream"):
            return web.Response(body=b.body, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        _no_delay(request)
        await response.prepare(request)
        last = len(b.frames) - 1
        for n, frame in enumerate(b.frames):
            await response.write(frame)
            if b.interval and 0 < n < last - 1:  # the gap between two content chunks
                await asyncio.sleep(b.interval)
        await response.write_eof()
        return response

    async def connections(self, request: web.Request) -> web.Response:
        return web.json_response({"opened": self.opened, "closed": self.closed})

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post(PATH, self.completions)
        app.router.add_get(CONNECTIONS, self.connections)
        return app

    def count_connections(self, server: web.Server) -> None:
        """Count the connections the server accepts and loses: a figure's upstream connects tell
        whether a gateway reused its pooled connections or opened new ones during the burst."""
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler, transport) -> None:  # type: ignore[no-untyped-def]
            self.opened += 1
            made(handler, transport)

        def connection_lost(handler, exc) -> None:  # type: ignore[no-untyped-def]
            self.closed += 1
            lost(handler, exc)

        server.connection_made = connection_made  # type: ignore[method-assign]
        server.connection_lost = connection_lost  # type: ignore[method-assign]


async def _serve(host: str, port: int, stub: Stub) -> None:
    runner = web.AppRunner(stub.app(), handle_signals=False, access_log=None)
    await runner.setup()
    assert runner.server is not None
    stub.count_connections(runner.server)
    await web.TCPSite(runner, host, port, backlog=4096).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"stub listening on http://{host}:{port}", flush=True)
    await stop.wait()
    await runner.cleanup()


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
