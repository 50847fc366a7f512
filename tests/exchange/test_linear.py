"""Every per-request pass is linear in the transcript (issue: a transcript of n pairs used to
block the event loop for O(n^2)). Proven by counting executed lines, not by timing: the work for
4n pairs is about 4 times the work for n pairs, for every provider kind."""

from __future__ import annotations

import sys

import orjson
import pytest

from gateway.continuity.codec import encode_turn
from gateway.continuity.keys import call_key
from gateway.continuity.restore import message_keys, restore
from gateway.ingress.chat.decode import decode_request
from gateway.ingress.errors import parse_json_body
from gateway.providers import KINDS, get_adapter
from gateway.repair import prepare
from gateway.transcript.model import ToolCall
from gateway.transcript.seal import Sealer
from gateway.transcript.target import Target

SEALER = Sealer(b"linear")
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def body(pairs: int) -> bytes:
    """A chat transcript of `pairs` user/assistant exchanges; every third turn calls a tool."""
    messages: list[dict] = [{"role": "system", "content": "Be brief."}]
    for n in range(pairs):
        messages.append({"role": "user", "content": f"question {n}"})
        if n % 3 == 0:
            call = {
                "id": f"call_{n:08d}",
                "type": "function",
                "function": {"name": "lookup", "arguments": "{}"},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{n:08d}", "content": "ok"})
        messages.append({"role": "assistant", "content": f"answer {n}"})
    messages.append({"role": "user", "content": "last"})
    return orjson.dumps({"model": "g", "messages": messages, "tools": TOOLS})


def run_body(length: int) -> bytes:
    """One long run of consecutive user-side messages (merged into one turn for some targets)
    and of assistant messages (merged for others)."""
    messages: list[dict] = [{"role": "user", "content": f"part {n}"} for n in range(length)]
    messages += [{"role": "assistant", "content": f"note {n}"} for n in range(length)]
    messages.append({"role": "user", "content": "go"})
    return orjson.dumps({"model": "g", "messages": messages})


def pipeline(raw: bytes, kind: str) -> None:
    request = decode_request(parse_json_body(raw, 64), SEALER)
    keys = message_keys(request, "s")
    # half the tool turns were recorded: restore finds and replaces them
    records = {
        call_key(b.id): encode_turn(m.blocks)
        for m in request.messages[::2]
        for b in m.blocks
        if type(b) is ToolCall
    }
    request, _ = restore(request, records, "s", keys=keys)
    adapter = get_adapter(kind)
    target = Target("p", kind, "model-x", "http://upstream.invalid", thinking_budget=2048)
    prepared = prepare(request, target, adapter.capabilities)
    adapter.encode_request(prepared.request, target, "key")


def lines_executed(raw: bytes, kind: str) -> int:
    count = 0

    def local(frame, event, arg):
        nonlocal count
        count += 1
        return local

    def global_trace(frame, event, arg):
        return local

    sys.settrace(global_trace)
    try:
        pipeline(raw, kind)
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("shape", [body, run_body])
@pytest.mark.parametrize("kind", KINDS)
def test_the_request_path_is_linear_in_the_transcript(kind, shape):
    small, large = lines_executed(shape(150), kind), lines_executed(shape(600), kind)
    assert large <= 4.4 * small, f"{kind}: {small} lines for 150, {large} for 600 (superlinear)"
