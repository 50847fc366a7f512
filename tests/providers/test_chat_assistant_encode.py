"""An assistant message on every Chat dialect's wire: the encoder (which reads the dialect's
reasoning choices once and takes calls first) against the message-at-a-time rule it implements."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from gateway.providers.openai_compat.adapter import ReasoningReplay
from gateway.transcript.model import Message, Reasoning, Request, Role, Text, ToolCall
from tests.providers.test_openai_compat import ADAPTERS, target


def _rule(blocks: tuple[Any, ...], replay: ReasoningReplay, tool_turns_need_field: bool) -> dict[str, Any]:
    texts = [b.text for b in blocks if type(b) is Text]
    reasoning = [b.text for b in blocks if type(b) is Reasoning]
    calls = [
        {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": b.arguments or "{}"}}
        for b in blocks
        if type(b) is ToolCall
    ]
    out: dict[str, Any] = {"role": "assistant"}
    if replay is ReasoningReplay.THINKING_CHUNKS and reasoning:
        out["content"] = [
            {"type": "text", "text": b.text}
            if type(b) is Text
            else {"type": "thinking", "thinking": [{"type": "text", "text": b.text}]}
            for b in blocks
            if type(b) is Reasoning or (type(b) is Text and b.text)
        ]
    else:
        text = "".join(texts)
        out["content"] = text if text or not calls else None
    if replay is ReasoningReplay.FIELD and (reasoning or (calls and tool_turns_need_field)):
        out["reasoning_content"] = "".join(reasoning)
    if calls:
        out["tool_calls"] = calls
    return out


BLOCKS = st.lists(
    st.one_of(
        st.builds(Text, st.sampled_from(["", " ", "Checking.", 'é\n"x"'])),
        st.builds(
            ToolCall,
            st.sampled_from(["call_1", "call_2"]),
            st.sampled_from(["f", "g"]),
            st.sampled_from(["", "{}", '{"a":1}']),
        ),
        st.sampled_from(["", "Thinking it over."]),  # own reasoning, stamped per target below
    ),
    max_size=6,
)


@given(BLOCKS)
def test_an_assistant_message_is_encoded_by_its_rule_on_every_chat_dialect(drawn):
    for kind, adapter in ADAPTERS.items():
        tgt = target(kind, "thinker")
        blocks = tuple(Reasoning(b, tgt.continuity({})) if type(b) is str else b for b in drawn)
        request = Request(
            model="m", messages=(Message(Role.USER, (Text("hi"),)), Message(Role.ASSISTANT, blocks))
        )
        body = orjson.loads(adapter.encode_request(request, tgt, "sk-test").body)
        dialect = adapter.dialect
        want = _rule(blocks, dialect.reasoning_replay, dialect.capabilities.reasoning_content_on_tool_turns)
        assert orjson.dumps(body["messages"][-1]) == orjson.dumps(want)
