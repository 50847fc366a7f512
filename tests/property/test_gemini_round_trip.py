"""The Gemini API codec round-trips the canonical transcript: a conversation written the way a
Gemini client writes it - each answer's parts sent back as the client got them (thoughts
included, signatures on their parts), function responses with the calls' ids - decodes to the
same canonical messages.

Equality is up to what Gemini's wire cannot express, made explicit in `normal`: adjacent text
parts without a signature are one text (a stream hands text over a part per chunk), a thought
part without a signature joins the next thought, and a Gemini-issued signature comes back with
its issuer unknown (offered to Gemini targets only; the continuity store restores the issuer).
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.ingress.gemini.decode import Decoded, decode_request
from gateway.ingress.gemini.encode import AnswerParts, answer_json
from gateway.transcript.model import (
    ANY_ISSUER,
    AssistantTurn,
    Block,
    Continuity,
    Message,
    Reasoning,
    Role,
    StopReason,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)
from gateway.transcript.seal import Sealer

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEALER = Sealer(b"k" * 32)

words = st.text(alphabet="abc xyz\n✓", min_size=1, max_size=12)
tokens = st.text(alphabet="ABCxyz0123+/", min_size=4, max_size=16).map(lambda t: t + "==")
metas = st.builds(
    Continuity,
    provider=st.sampled_from(["claude", "gem", "ds"]),
    scope=st.sampled_from(["claude", "acme"]),
    kind=st.sampled_from(["anthropic", "gemini", "openai_responses", "deepseek"]),
    model=st.sampled_from(["m-1", "m-2"]),
    data=st.dictionaries(
        st.sampled_from(["signature", "thought_signature", "native_id"]), tokens, max_size=2
    ),
)


@st.composite
def answers(draw: st.DrawFn, n: int) -> list[Block]:
    blocks: list[Block] = []
    for i, what in enumerate(
        draw(st.lists(st.sampled_from(["reasoning", "text", "signed", "call"]), min_size=1, max_size=6))
    ):
        if what == "reasoning":
            blocks.append(Reasoning(draw(words), draw(st.none() | metas)))
        elif what == "text":
            blocks.append(Text(draw(words), draw(st.none() | metas)))
        elif what == "signed":
            blocks.append(Text("", draw(metas)))
        else:
            args = orjson.dumps({"q": draw(words)}).decode()
            blocks.append(
                ToolCall(
                    f"call_{n}_{i}", draw(st.sampled_from(["search", "run"])), args, draw(st.none() | metas)
                )
            )
    return blocks


def _echoed(meta: Continuity | None) -> Continuity | None:
    if meta is not None and meta.kind == "gemini" and meta.data.get("thought_signature"):
        return Continuity(
            "client", ANY_ISSUER, "gemini", ANY_ISSUER, {"thought_signature": meta.data["thought_signature"]}
        )
    return meta


def normal(blocks: list[Block]) -> tuple[Block, ...]:
    out: list[Block] = []
    for block in blocks:
        t = type(block)
        if t is Text:
            block = Text(block.text, _echoed(block.meta))
        elif t is Reasoning:
            block = Reasoning(block.text, _echoed(block.meta))
        elif t is ToolCall:
            block = ToolCall(block.id, block.name, block.arguments, _echoed(block.meta))
        prev = out[-1] if out else None
        if t is Text and type(prev) is Text and prev.meta is None and block.meta is None:
            out[-1] = Text(prev.text + block.text)
        elif t is Reasoning and type(prev) is Reasoning and prev.meta is None:
            out[-1] = Reasoning(prev.text + block.text, block.meta)
        else:
            out.append(block)
    return tuple(out)


@given(st.lists(st.tuples(words, st.data()), min_size=1, max_size=4))
@SETTINGS
def test_a_conversation_round_trips(steps: list[tuple[str, Any]]) -> None:
    contents: list[dict] = []
    expected: list[Message] = []
    for n, (prompt, data) in enumerate(steps):
        contents.append({"role": "user", "parts": [{"text": prompt}]})
        expected.append(Message(Role.USER, (Text(prompt),)))
        blocks = data.draw(answers(n))
        turn = AssistantTurn(blocks, StopReason.END_TURN, Usage())
        answer = answer_json(AnswerParts("r", "m", True, SEALER), turn)
        contents.append(answer["candidates"][0]["content"])  # sent back as the client got it
        expected.append(Message(Role.ASSISTANT, normal(blocks)))
        calls = [b for b in blocks if type(b) is ToolCall]
        if calls:
            outputs = [data.draw(words) for _ in calls]
            contents.append(
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": c.name, "id": c.id, "response": {"output": o}}}
                        for c, o in zip(calls, outputs, strict=True)
                    ],
                }
            )
            expected.append(
                Message(Role.TOOL, tuple(ToolResult(c.id, o) for c, o in zip(calls, outputs, strict=True)))
            )
    request = decode_request({"contents": contents}, "m", False, SEALER, out := Decoded())
    assert out.ignored_tokens == 0
    assert request.messages == tuple(expected)
