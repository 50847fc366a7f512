"""The relay's step per upstream chunk, in process: an event stream over the real upstream
reader (`Upstream`, its `Connection` parsing the chunked body with llhttp) fed one frame per loop
iteration in place of a socket, the Chat decoder, the relay, the Chat encoder, and aiohttp's
chunked writer over a transport that drops the bytes. What the
bench's stream figures hold besides sockets, aiohttp's reader and each request's own cost.

    python bench/relay_step.py [--reps N]

Prints microseconds per upstream content chunk (what a stream of 64 costs over one of one, per
chunk more), per stream of one content chunk (what a stream costs to set up, decode, relay and
end besides its chunks) and the Chat decoder's share of a stream's finish and usage chunks; the
best of five rounds each. Runs against another checkout too (PYTHONPATH=<tree>) that has the
same `Upstream`/`Connection` (gateway/upstream_http.py's client, from 1f3ad9b on).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
from operator import methodcaller
from types import SimpleNamespace

import orjson
import uvloop
from aiohttp.http_writer import StreamWriter

from gateway.answering import Relay
from gateway.deadlines import Deadlines
from gateway.ingress.chat.encode import ChatStreamEncoder
from gateway.ingress.textual import ServerToolsAsText
from gateway.providers import get_adapter
from gateway.providers.base import HttpRequest
from gateway.routing.answer import EventStream, IdMapper
from gateway.transcript.assembler import Assembler
from gateway.transcript.seal import Sealer
from gateway.transcript.target import Target
from gateway.upstream import UPSTREAM_READ_BUFFER, Timeouts, Upstream
from gateway.upstream_connection import Connection
from gateway.upstream_http import Response

CHUNKS = 64  # the bench's streams
TARGET = Target(provider="bench", kind="openai_chat", model="m", base_url="https://bench.invalid/v1")
SEALER = Sealer(b"b" * 32)


def _frames() -> list[bytes]:
    """The stub's stream (bench/stub.py): a role chunk, one content chunk each, the end, usage."""
    head = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def frame(choices: list, **extra: object) -> bytes:
        return b"data: " + orjson.dumps({**head, "choices": choices, **extra}) + b"\n\n"

    def choice(delta: dict, finish: str | None = None) -> list:
        return [{"index": 0, "delta": delta, "finish_reason": finish}]

    usage = {"prompt_tokens": 10, "completion_tokens": CHUNKS, "total_tokens": 10 + CHUNKS}
    return [
        frame(choice({"role": "assistant", "content": ""})),
        *(frame(choice({"content": "tok "})) for _ in range(CHUNKS)),
        frame(choice({}, "stop")),
        frame([], usage=usage) + b"data: [DONE]\n\n",
    ]


FRAMES = _frames()


class _Pool:
    def give_back(self, connection: object) -> None:
        pass

    def forget(self, connection: object) -> None:
        pass


class _Wire:
    """The upstream socket's side: the real `Connection` (llhttp, its buffer, its waiter) fed
    one chunked-body frame per loop iteration, as a socket that has a frame in at each wake-up.
    The reader, woken by a frame, handles it and waits again before the next one is fed (the
    wake-up runs before the feeder's next turn), so each frame costs one wake-up."""

    def __init__(self, connection: Connection, frames: list[bytes]) -> None:
        self._connection = connection
        self._frames = [b"%x\r\n%b\r\n" % (len(f), f) for f in frames] + [b"0\r\n\r\n"]
        self._next = 0
        asyncio.get_running_loop().call_soon(self._feed)

    def _feed(self) -> None:
        self._connection.data_received(self._frames[self._next])
        self._next += 1
        if self._next < len(self._frames):
            asyncio.get_running_loop().call_soon(self._feed)

    # the transport the connection holds
    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _upstream(frames: list[bytes]) -> Upstream:
    """The real `Upstream` over the real connection and response, past its headers (what the
    attempt hands the relay), its body still to come from `_Wire`."""
    connection = Connection(_Pool(), ("http", "bench.invalid", 80), 2 * UPSTREAM_READ_BUFFER)
    wire = _Wire(connection, frames)
    connection.connection_made(wire)  # type: ignore[arg-type]
    connection._active = True  # noqa: SLF001 - as once its request is written
    connection.data_received(HEAD)
    response = Response(None, None, b"")  # type: ignore[arg-type]
    response._connection = connection  # noqa: SLF001 - as `start` leaves it
    request = HttpRequest(url="http://bench.invalid/", headers={}, body=b"")
    # the session only for its books of deadlines (the idle watchdog's one timer), as the real
    # client's (gateway/upstream_http.py)
    session = SimpleNamespace(idles=Deadlines(methodcaller("check_idle")), deadlines=None)
    upstream = Upstream(session, request, Timeouts())  # type: ignore[arg-type]
    upstream._response = response  # noqa: SLF001 - as `__aenter__` leaves it
    return upstream


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def writelines(self, chunks: object) -> None:
        pass

    def is_closing(self) -> bool:
        return False


class _Protocol:
    transport = _Transport()
    writing_paused = False
    _paused = False


class _Response:
    """`web.StreamResponse.write`: its own check, then its writer."""

    def __init__(self, writer: StreamWriter) -> None:
        self._writer = writer

    async def write(self, data: bytes) -> None:
        assert isinstance(data, (bytes, bytearray, memoryview))
        await self._writer.write(data)


class _Exchange:
    usage = None
    ttft = 1.0  # taken already: the relay stops asking after the first content

    def __init__(self, writer: StreamWriter) -> None:
        self.http = SimpleNamespace(protocol=_Protocol, writer=writer)


async def _one_stream(frames: list[bytes]) -> None:
    writer = StreamWriter(_Protocol(), asyncio.get_running_loop())  # type: ignore[arg-type]
    writer.enable_chunking()
    writer._headers_written = True  # noqa: SLF001 - as after the head's write
    decoder = get_adapter("openai_chat").stream_decoder(TARGET, None)
    stream = EventStream(IdMapper(TARGET), _upstream(frames), decoder)
    stream.after_commit(lambda error: None)
    encoder = ServerToolsAsText(ChatStreamEncoder("chatcmpl-1", "m", True, SEALER, 7))
    relay = Relay(_Response(writer), encoder, Assembler(), _Exchange(writer))  # type: ignore[arg-type]
    assert await relay.run(SimpleNamespace(stream=stream)) is None  # type: ignore[arg-type]


async def _measure(reps: int, frames: list[bytes]) -> float:
    """CPU microseconds per stream of `frames` (the best of five rounds)."""
    best = float("inf")
    for _ in range(5):
        gc.collect()
        start = time.process_time()
        for _ in range(reps):
            await _one_stream(frames)
        best = min(best, (time.process_time() - start) / reps * 1e6)
    return best


async def _both(reps: int) -> tuple[float, float]:
    # a stream of one content chunk: the role chunk, the content, the finish, the usage and [DONE]
    short = [*FRAMES[:2], *FRAMES[-2:]]
    return await _measure(reps, FRAMES), await _measure(reps, short)


def _ending(reps: int) -> float:
    """CPU microseconds of the Chat decoder's finish and usage+[DONE] chunks per stream: decoders
    fed the whole short stream, minus ones fed its role and content chunks (best of five)."""
    adapter = get_adapter("openai_chat")

    def run(frames: list[bytes]) -> float:
        gc.collect()
        start = time.process_time()
        for _ in range(reps):
            decoder = adapter.stream_decoder(TARGET, None)
            for frame in frames:
                decoder.feed(frame)
        return (time.process_time() - start) / reps * 1e6

    return min(run([*FRAMES[:2], *FRAMES[-2:]]) - run(FRAMES[:2]) for _ in range(5))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/relay_step.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300, help="streams per round (default 300)")
    args = parser.parse_args()
    whole, short = uvloop.run(_both(args.reps))
    # a chunk: what 64 content chunks more cost; a stream: what a stream of one costs
    print(f"relay step per upstream chunk: {(whole - short) / (len(FRAMES) - 4):.2f} us")
    print(f"relay step per stream of one content chunk (its setup): {short:.1f} us")
    print(f"decode of a stream's finish and usage chunks: {_ending(args.reps * 40):.2f} us")


if __name__ == "__main__":
    main()
