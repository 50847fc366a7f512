"""A stream's own pieces, in process, warm: what a streamed answer of one content chunk does that
a whole answer does not, step by step, against the whole answer's counterparts. CPU microseconds
per stream (best of five rounds of N each), on the bench stub's frames (bench/stub.py).

    python bench/stream_pieces.py [--reps N]        (another checkout: PYTHONPATH=<tree> first)

`decode`: the Chat stream decoder made, fed what a paced stream's first read brings (the role and
first content chunk together) and then its end (finish, usage, [DONE]), and finished, through the
event stream (`EventStream`: the id mapper, the commit point's loop); `whole decode`: the whole
body's decode (`decode_response`) and its event stream. `encode`: the client's Chat stream
encoder (behind the server-tools wrapper) made, its head, the events, its ending; `whole
encode`: the whole answer's fold and encode (`codec.answer`).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from gateway.ingress.base import Inbound, Reply  # noqa: E402
from gateway.ingress.chat.codec import CODEC  # noqa: E402
from gateway.providers import get_adapter  # noqa: E402
from gateway.routing.answer import EventStream, IdMapper  # noqa: E402
from gateway.routing.attempt import commits  # noqa: E402
from gateway.transcript.assembler import Assembler  # noqa: E402
from gateway.transcript.model import Request  # noqa: E402
from gateway.transcript.seal import Sealer  # noqa: E402
from gateway.transcript.target import Target  # noqa: E402

TARGET = Target(provider="bench", kind="openai_chat", model="stub", base_url="https://bench.invalid/v1")
SEALER = Sealer(b"b" * 32)


def _frames() -> tuple[bytes, bytes, bytes]:
    """The stub's stream of one content chunk as a paced stream's reads bring it: the role and
    content chunks, then the finish, usage and [DONE]; and the whole body of the same answer."""
    head = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0, "model": "stub"}

    def frame(payload: dict) -> bytes:
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    usage = {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    first = frame({**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
    first += frame({**head, "choices": [{"index": 0, "delta": {"content": "tok "}}]})
    last = frame({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    last += frame({**head, "choices": [], "usage": usage}) + b"data: [DONE]\n\n"
    message = {"role": "assistant", "content": "tok "}
    body = orjson.dumps(
        {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": "stub",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage,
        }
    )
    return first, last, body


FIRST, LAST, BODY = _frames()
ADAPTER = get_adapter("openai_chat")


class _Upstream:
    """What `EventStream` takes its bytes from: the two reads, then the end."""

    __slots__ = ("_reads",)

    def __init__(self) -> None:
        self._reads = [FIRST, LAST, b""]

    def take(self) -> bytes:
        return self._reads.pop(0)

    def drained(self) -> bool:
        return len(self._reads) < 2


def decode() -> list[Any]:
    """The attempt's commit loop and then the relay's polls, as far as events go."""
    stream = EventStream(IdMapper(TARGET), _Upstream(), ADAPTER.stream_decoder(TARGET, None))  # type: ignore[arg-type]
    buffered: list[Any] = []
    committed = False
    while not committed:
        batch = stream.poll()
        for event in batch:  # type: ignore[union-attr]
            buffered.append(event)
            committed = committed or commits(event)
    stream.unread(buffered)
    events = []
    while (batch := stream.poll()) is not None:
        events += batch  # type: ignore[arg-type]
    return events


def whole_decode() -> list[Any]:
    stream = EventStream(IdMapper(TARGET), events=ADAPTER.decode_response(BODY, TARGET, None))
    events = []
    while (batch := stream.poll()) is not None:
        events += batch  # type: ignore[arg-type]
    return events


EVENTS = decode()
INBOUND = Inbound(Request(model="stub", messages=()), None, 0, context=False)
REPLY = Reply("chatcmpl-1", "stub", 7)


def encode() -> bytes:
    encoder = CODEC.stream_encoder(INBOUND, REPLY, SEALER)
    assembler = Assembler()
    out = [encoder.start()]
    for event in EVENTS:
        assembler.add(event)
        chunk = encoder.event(event)
        if chunk is not None:
            out.append(chunk)
    assembler.finish()
    out.append(encoder.finish())
    return b"".join(out)


def whole_encode() -> bytes:
    assembler = Assembler()
    for event in EVENTS:
        assembler.add(event)
    return CODEC.answer(INBOUND, REPLY, assembler.finish(), SEALER)


STEPS: dict[str, Callable[[], object]] = {
    "decode": decode,
    "whole decode": whole_decode,
    "encode": encode,
    "whole encode": whole_encode,
}


def measure(step: Callable[[], object], reps: int) -> float:
    best = float("inf")
    for _ in range(5):
        gc.collect()
        start = time.process_time()
        for _ in range(reps):
            step()
        best = min(best, (time.process_time() - start) / reps * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python bench/stream_pieces.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--reps", type=int, default=20000)
    args = parser.parse_args()
    figures = {name: measure(step, args.reps) for name, step in STEPS.items()}
    for name, us in figures.items():
        print(f"{name:14} {us:6.2f} us")
    print(
        f"a stream above a whole answer: decode {figures['decode'] - figures['whole decode']:+.2f} us,"
        f" encode {figures['encode'] - figures['whole encode']:+.2f} us"
    )


if __name__ == "__main__":
    main()
