"""The transcript pipeline of one small request, in process (no sockets, no rig): CPU time of each
step the gateway runs on the bench's small chat request to an OpenAI Chat upstream, as the
exchange runs them: the dialect's decode into the canonical Request, repair (`prepare`), the
provider's request encode, the provider's decode of the whole answer, and the answer's fold and
encode in the client's dialect. The bench's c=1 / c=32 figures hold this plus sockets, aiohttp,
routing and bookkeeping; this is the part a decode, repair or answer change moves, measured
without a shared machine's noise in between.

    python bench/request_path.py [--reps N]

Prints microseconds per request (the best of five rounds) for each step and for all of them,
then each dialect's decode of a one-message request carrying the bench's 20 tools, as an agent
sends them every turn (`gateway/ingress/tool_lists.py`), then an agent's next turn (a chat
transcript of 20 messages and the 20 tools, in each dialect's form, its two turns before seen just
before) parsed from its bytes as the exchange parses it (the decode memo, the codec's typed
reading) and decoded.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any

import orjson

from bench import workloads
from gateway.ingress.base import Inbound, Reply
from gateway.ingress.chat.codec import CODEC
from gateway.ingress.gemini.codec import GENERATE
from gateway.ingress.messages.codec import CODEC as MESSAGES
from gateway.ingress.responses.codec import CODEC as RESPONSES
from gateway.providers import get_adapter
from gateway.repair import Prepared, prepare
from gateway.routing.answer import EventStream, IdMapper
from gateway.transcript.assembler import Assembler
from gateway.transcript.events import Event
from gateway.transcript.seal import Sealer
from gateway.transcript.target import Target

SEALER = Sealer(b"b" * 32)
CODEC_OF = {"chat": CODEC, "messages": MESSAGES, "responses": RESPONSES, "gemini": GENERATE}
TARGET = Target(provider="stub", kind="openai_chat", model="stub", base_url="https://bench.invalid/v1")
ADAPTER = get_adapter(TARGET.kind)
REPLY = Reply("chatcmpl-1", "stub", 7)
# what the bench's stub answers a small request (bench/stub.py)
ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "tok "}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }
)


def decode(body: bytes) -> Inbound:
    return CODEC.decode(orjson.loads(body), {}, SEALER)


def repair(inbound: Inbound) -> Prepared:
    return prepare(inbound.request, TARGET, ADAPTER.capabilities)


def encode(prepared: Prepared) -> object:
    return ADAPTER.encode_request(prepared.request, TARGET, "key")


def decode_answer(prepared: Prepared) -> list[Event]:
    return ADAPTER.decode_response(ANSWER, TARGET, prepared.request)


def answer(inbound: Inbound, events: list[Event]) -> bytes:
    """The events as the relay reads a whole answer (ids mapped), folded, in the client's dialect."""
    stream = EventStream(IdMapper(TARGET), events=events)
    assembler = Assembler()
    for event in stream._pending[0]:
        assembler.add(event)
    return CODEC.answer(inbound, REPLY, assembler.finish(), SEALER)


def whole(body: bytes) -> bytes:
    inbound = decode(body)
    prepared = repair(inbound)
    encode(prepared)
    return answer(inbound, decode_answer(prepared))


def per_request(run: Callable[[], object], reps: int, rounds: int) -> float:
    """Microseconds of CPU per request, the best of `rounds` rounds of `reps` runs."""
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        started = time.process_time()
        for _ in range(reps):
            run()
        best = min(best, (time.process_time() - started) / reps * 1e6)
    return best


def measure(reps: int, rounds: int = 5) -> dict[str, float]:
    body = workloads.small_body("stub")
    inbound = decode(body)
    prepared = repair(inbound)
    events = decode_answer(prepared)
    steps: dict[str, Callable[[], object]] = {
        "decode": lambda: decode(body),
        "repair": lambda: repair(inbound),
        "encode": lambda: encode(prepared),
        "decode answer": lambda: decode_answer(prepared),
        "fold + answer": lambda: answer(inbound, events),
        "all": lambda: whole(body),
    }
    return {name: per_request(run, reps, rounds) for name, run in steps.items()}


def agent_bodies() -> dict[str, tuple[Callable[[Any], Inbound], Any]]:
    """Per dialect: its decode, and a one-message request with the bench's 20 tools in its form."""
    functions = [t["function"] for t in workloads.tools()]
    question = "What is six times seven?"
    return {
        "chat": (
            lambda body: CODEC.decode(body, {}, SEALER),
            {"model": "m", "messages": [{"role": "user", "content": question}], "tools": workloads.tools()},
        ),
        "messages": (
            lambda body: MESSAGES.decode(body, {}, SEALER),
            {
                "model": "m",
                "max_tokens": 1024,
                "messages": [{"role": "user", "content": question}],
                "tools": [
                    {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
                    for f in functions
                ],
            },
        ),
        "responses": (
            lambda body: RESPONSES.decode(body, {}, SEALER),
            {"model": "m", "input": question, "tools": [{"type": "function", **f} for f in functions]},
        ),
        "gemini": (
            lambda body: GENERATE.decode(body, {}, SEALER, params={"model": "m"}),
            {
                "contents": [{"role": "user", "parts": [{"text": question}]}],
                "tools": [{"functionDeclarations": functions}],
            },
        ),
    }


def measure_tools(reps: int, rounds: int = 5) -> dict[str, float]:
    return {
        dialect: per_request(lambda: decode(body), reps, rounds)  # noqa: B023 - called at once
        for dialect, (decode, body) in agent_bodies().items()
    }


def _as_messages(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An agent's chat transcript (`workloads.agent_messages`) in the Messages API's form."""
    out: list[dict[str, Any]] = []
    for m in chat:
        if m["role"] == "system":
            continue  # the Messages API's `system` field: not part of the transcript measured here
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            out.append({"role": "user", "content": [block]})
        elif m.get("tool_calls"):
            calls = [
                {"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": {}}
                for c in m["tool_calls"]
            ]
            out.append({"role": "assistant", "content": calls})
        else:
            out.append({"role": m["role"], "content": m["content"] or "..."})
    return out


def _as_gemini(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An agent's chat transcript (`workloads.agent_messages`) as Gemini `contents`."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in chat:
        if m["role"] == "system":
            continue  # Gemini's `systemInstruction`: not part of the transcript measured here
        if m["role"] == "tool":
            response = {"name": names[m["tool_call_id"]], "response": {"content": m["content"]}}
            out.append({"role": "user", "parts": [{"functionResponse": response}]})
        elif m.get("tool_calls"):
            parts = []
            for c in m["tool_calls"]:
                names[c["id"]] = c["function"]["name"]
                parts.append({"functionCall": {"name": c["function"]["name"], "args": {}}})
            out.append({"role": "model", "parts": parts})
        else:
            role = "model" if m["role"] == "assistant" else "user"
            out.append({"role": role, "parts": [{"text": m["content"] or "..."}]})
    return out


def _as_responses(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An agent's chat transcript (`workloads.agent_messages`) as Responses `input` items."""
    out: list[dict[str, Any]] = []
    for m in chat:
        if m["role"] == "system":
            continue  # the Responses API's `instructions`: not part of the transcript measured here
        if m["role"] == "tool":
            out.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
        elif m.get("tool_calls"):
            for c in m["tool_calls"]:
                function = c["function"]
                call = {"call_id": c["id"], "name": function["name"], "arguments": function["arguments"]}
                out.append({"type": "function_call", **call})
        else:
            out.append({"role": m["role"], "content": m["content"] or "..."})
    return out


def measure_next_turn(dialect: str, sessions: int, rounds: int = 5, messages: int = 20) -> float:
    """Microseconds of CPU per next turn (parse from bytes and decode, the exchange's way) of an
    agent in `dialect` ("chat", "messages", "responses" or "gemini"), the best of `rounds` rounds
    of `sessions` sessions, each with a memo that saw its two turns before."""
    from gateway.config import ServerConfig
    from gateway.ingress.memo import DecodeMemo
    from gateway.ingress.split import parse_shared

    limits = ServerConfig()
    body_of = agent_bodies()[dialect][1]
    tools = body_of["tools"]
    call = {"name": workloads.tools()[0]["function"]["name"], "arguments": "{}"}

    def answer(n: int) -> dict[str, Any]:
        calls = [{"id": f"call_next_{n}", "type": "function", "function": call}]
        return {"role": "assistant", "content": None, "tool_calls": calls}

    forms = {"chat": list, "messages": _as_messages, "responses": _as_responses, "gemini": _as_gemini}
    convert = forms[dialect]
    field = {"gemini": "contents", "responses": "input"}.get(dialect, "messages")
    head = {**body_of, "model": "stub"}
    if dialect == "gemini":  # its model is in the path
        del head["model"]

    def body(transcript: list[dict[str, Any]]) -> bytes:
        return orjson.dumps({**head, field: convert(transcript), "tools": tools})

    def turn(memo: DecodeMemo, raw: bytes) -> None:
        parsed = parse_shared(raw, field, memo, "s", limits, None, False, CODEC_OF[dialect].typed_items)
        assert parsed is not None
        CODEC_OF[dialect].decode(parsed[0], {}, SEALER, parsed[1], params={"model": "stub"})
        memo.settle()

    best = float("inf")
    for round_ in range(rounds):
        runs = []
        for i in range(sessions):
            seed = f"{round_}-{i}"
            first = workloads.agent_messages(messages, seed)
            second = workloads.next_turn(first, answer(1), seed)
            memo = DecodeMemo(32 << 20)
            for seen in (first, second):
                turn(memo, body(seen))
            runs.append((memo, body(workloads.next_turn(second, answer(2), seed))))
        gc.collect()
        started = time.process_time()
        for memo, raw in runs:
            turn(memo, raw)
        best = min(best, (time.process_time() - started) / sessions * 1e6)
    return best


def main() -> None:
    about = __doc__.split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python bench/request_path.py", description=about)
    parser.add_argument("--reps", type=int, default=20000, help="requests per round and step")
    args = parser.parse_args()
    print("us per small chat request to an OpenAI Chat upstream, each step in process")
    for name, value in measure(args.reps).items():
        print(f"{name:14} {value:7.2f}")
    print("us per decode of a one-message request with 20 tools, per dialect")
    for name, value in measure_tools(max(1, args.reps // 4)).items():
        print(f"{name:14} {value:7.2f}")
    print("us per agent's next turn (20 messages, 20 tools), parsed from bytes and decoded, per dialect")
    for name in ("chat", "messages", "responses", "gemini"):
        print(f"{name:14} {measure_next_turn(name, max(1, args.reps // 40)):7.2f}")


if __name__ == "__main__":
    main()
