"""Anthropic interleaved thinking (the `interleaved-thinking` beta: thinking between the tool calls
of one turn, with parallel calls) moved to every other family and back: each strict simulator
accepts the repaired transcript, and back at Anthropic every signed thinking block is replayed in
its place, verified."""

from __future__ import annotations

import orjson
import pytest

from gateway.providers import get_adapter
from gateway.repair import Prepared, prepare
from gateway.simulators.anthropic_rules import thinking_signature
from gateway.simulators.registry import VALIDATORS
from gateway.transcript.model import Message, Reasoning, Request, Role, Text, ToolCall, ToolResult, ToolSpec
from gateway.transcript.target import Target
from tests.property.transcripts import KINDS, state_for, target_for

CLAUDE = target_for("anthropic", thinking=True)
TOOLS = (
    ToolSpec("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}),
    ToolSpec("grep", "Search", {"type": "object", "properties": {"q": {"type": "string"}}}),
)


def signed(text: str) -> Reasoning:
    signature = thinking_signature(state_for("anthropic"), CLAUDE.model, text)
    return Reasoning(text, CLAUDE.continuity({"signature": signature}))


def interleaved() -> Request:
    """One Claude turn: think, call read; think again, call grep and read in parallel; the
    results; then think and answer."""
    turn = Message(
        Role.ASSISTANT,
        (
            signed("First I need the file."),
            ToolCall("toolu_a", "read", '{"path": "a.txt"}'),
            signed("And where the name is used."),
            ToolCall("toolu_b", "grep", '{"q": "name"}'),
            ToolCall("toolu_c", "read", '{"path": "b.txt"}'),
        ),
    )
    results = Message(
        Role.TOOL,
        (ToolResult("toolu_a", "alpha"), ToolResult("toolu_b", "b.txt:1"), ToolResult("toolu_c", "beta")),
    )
    answer = Message(Role.ASSISTANT, (signed("Both files agree."), Text("They agree.")))
    return Request(
        model="group",
        messages=(
            Message(Role.USER, (Text("Compare a and b."),)),
            turn,
            results,
            answer,
            Message(Role.USER, (Text("Thanks. More?"),)),
        ),
        tools=TOOLS,
        thinking=True,
        max_tokens=4096,
    )


def accepted(request: Request, target: Target) -> Prepared:
    prepared = prepare(request, target, get_adapter(target.kind).capabilities)
    body = orjson.loads(get_adapter(target.kind).encode_request(prepared.request, target, "k").body)
    state = state_for(target.kind)
    rejection = VALIDATORS[target.kind](state, body, target.model)
    assert rejection is None, f"{target.kind}: {rejection.message}\n{body}"
    return prepared


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "anthropic"])
@pytest.mark.parametrize("thinking", [False, True])
def test_interleaved_thinking_moves_to_every_family_and_back(kind, thinking):
    request = interleaved()
    prepared = accepted(request, target_for(kind, thinking))
    calls = [b for m in prepared.request.messages for b in m.blocks if type(b) is ToolCall]
    assert [c.name for c in calls] == ["read", "grep", "read"], "every parallel call kept, in order"
    results = [b for m in prepared.request.messages for b in m.blocks if type(b) is ToolResult]
    assert [r.content for r in results] == ["alpha", "b.txt:1", "beta"]
    # the other family's answer joins the history; Claude gets its own thinking back in place
    other = Message(Role.ASSISTANT, (Text("Here is more."),))
    back = Request(
        model="group",
        messages=(*request.messages, other, Message(Role.USER, (Text("Summarize."),))),
        tools=TOOLS,
        thinking=True,
        max_tokens=4096,
    )
    prepared = prepare(back, CLAUDE, get_adapter("anthropic").capabilities)
    body = orjson.loads(get_adapter("anthropic").encode_request(prepared.request, CLAUDE, "k").body)
    state = state_for("anthropic")
    assert VALIDATORS["anthropic"](state, body, CLAUDE.model) is None
    first_turn = body["messages"][1]["content"]
    assert [b["type"] for b in first_turn] == ["thinking", "tool_use", "thinking", "tool_use", "tool_use"]
    signatures = [b["signature"] for m in body["messages"] for b in m["content"] if b["type"] == "thinking"]
    assert len(signatures) == 3 and not any(r.kind == "reasoning_dropped" for r in prepared.repairs)
