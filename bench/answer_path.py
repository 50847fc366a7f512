"""The answer side per upstream chunk, in process (no sockets, no rig): CPU time of a provider's
stream decoder (framing, JSON, events, tool-call id mapping) over a recorded stream fed one event
per chunk, and of each client dialect's per-event work on those events (the assembler that keeps
the turn, the dialect's encoder). The bench's stream figures hold this plus sockets, aiohttp and
each request's own cost spread over its chunks; this is the part a decoder or an encoder change
moves, measured without a shared machine's noise in between.

    python bench/answer_path.py [--reps N]

Prints microseconds per upstream chunk (the best of five rounds), one row per provider family.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import orjson

from gateway.ingress.base import StreamEncoder
from gateway.ingress.chat.encode import ChatStreamEncoder
from gateway.ingress.gemini.encode import AnswerParts, GeminiStreamEncoder
from gateway.ingress.messages.encode import MessageEvents, MessagesStreamEncoder
from gateway.ingress.ndjson import NdjsonEncoder
from gateway.ingress.responses.output import Answering
from gateway.ingress.responses.stream import ResponsesStreamEncoder
from gateway.ingress.responses.tools import ToolNames
from gateway.ingress.textual import ServerToolsAsText
from gateway.providers import get_adapter
from gateway.routing.answer import IdMapper
from gateway.transcript.assembler import Assembler
from gateway.transcript.events import Event, StreamError
from gateway.transcript.seal import Sealer
from gateway.transcript.target import Target

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
SEALER = Sealer(b"b" * 32)

# provider kind: (recorded stream, one `*.chunks.txt` line per event; events named by their type)
STREAMS: dict[str, tuple[str, bool]] = {
    "openai_chat": ("openai-chat/openai-text.chunks.txt", False),
    "deepseek": ("deepseek/deepseek-reasoning.chunks.txt", False),
    "anthropic": ("anthropic/anthropic-claude-sonnet-5-reasoning-summarized.chunks.txt", True),
    "openai_responses": ("openai-responses/openai-reasoning-encrypted-content.1.chunks.txt", True),
    "gemini": ("google/google-reasoning-gemini3.chunks.txt", False),
}
# the chat family's streams end with a terminator the recordings leave out
TERMINATOR = {"openai_chat": b"data: [DONE]\n\n", "deepseek": b"data: [DONE]\n\n"}

DIALECTS: dict[str, Callable[[], StreamEncoder]] = {
    "chat": lambda: ServerToolsAsText(ChatStreamEncoder("chatcmpl-1", "m", True, SEALER, 7)),
    "messages": lambda: MessagesStreamEncoder(MessageEvents("msg_1", "m", None, False, SEALER)),
    "responses": lambda: ServerToolsAsText(
        ResponsesStreamEncoder(
            Answering({"model": "m"}, ToolNames({}, {}), True, encrypted=False), "resp_1", 7, SEALER
        ),
        "openai_responses",
    ),
    "gemini": lambda: GeminiStreamEncoder(AnswerParts("r1", "m", True, SEALER), sse=True),
    "ndjson": lambda: ServerToolsAsText(NdjsonEncoder(lambda kind, meta: "token")),
}


def chunks(kind: str, root: Path = FIXTURES) -> list[bytes]:
    """The recorded stream as its SSE events, one per chunk."""
    name, named = STREAMS[kind]
    out = []
    for line in (root / name).read_text(encoding="utf-8").splitlines():
        if line.strip():
            event = orjson.loads(line).get("type") if named else None
            out.append((f"event: {event}\n" if event else "").encode() + b"data: " + line.encode() + b"\n\n")
    return out + ([TERMINATOR[kind]] if kind in TERMINATOR else [])


def decode(kind: str, stream: list[bytes]) -> list[list[Event]]:
    """The batches the relay gets: one per chunk, then the decoder's finish."""
    target = Target(provider="bench", kind=kind, model="m", base_url="https://bench.invalid/v1")
    decoder = get_adapter(kind).stream_decoder(target, None)
    mapper = IdMapper(target)
    batches = [[mapper(e) for e in decoder.feed(chunk)] for chunk in stream]
    return [*batches, [mapper(e) for e in decoder.finish()]]


def encode(dialect: str, batches: list[list[Event]]) -> bytes:
    encoder, assembler = DIALECTS[dialect](), Assembler()
    out = [encoder.start()]
    for batch in batches:
        for event in batch:
            assembler.add(event)
            chunk = encoder.event(event)
            if chunk is not None:
                out.append(chunk)
    assembler.finish()
    out.append(encoder.finish())
    return b"".join(out)


def per_chunk(run: Callable[[], object], chunks: int, reps: int, rounds: int) -> float:
    """Microseconds of CPU per chunk, the best of `rounds` rounds of `reps` runs."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(reps):
            run()
        best = min(best, (time.process_time() - started) / reps / chunks * 1e6)
    return best


def measure(reps: int, rounds: int = 5) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for kind in STREAMS:
        gc.collect()
        stream = chunks(kind)
        batches = decode(kind, stream)
        failed = [e for batch in batches for e in batch if type(e) is StreamError]
        if failed:
            raise SystemExit(f"{kind}: the recorded stream does not decode: {failed}")
        runs = max(1, reps // len(stream))
        row = {"decode": per_chunk(partial(decode, kind, stream), len(stream), runs, rounds)}
        for dialect in DIALECTS:
            row[dialect] = per_chunk(partial(encode, dialect, batches), len(stream), runs, rounds)
        table[kind] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/answer_path.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=4000, help="chunks decoded per round and provider")
    args = parser.parse_args()
    table = measure(args.reps)
    print("us per upstream chunk: the provider's decode, then each dialect's assembler + encoder")
    print(f"{'provider':18} {'decode':>7} " + " ".join(f"{d:>9}" for d in DIALECTS))
    for kind, row in table.items():
        print(f"{kind:18} {row['decode']:7.2f} " + " ".join(f"{row[d]:9.2f}" for d in DIALECTS))


if __name__ == "__main__":
    main()
