"""The Chat encoder writes an agent's common messages (one-call assistant turns, one-result tool
messages) itself, in its loop: each must be what the message-at-a-time methods (`_assistant`,
`_message`) make of it, on every Chat dialect, for transcripts long and short (held or not), with
the same errors where a message cannot be encoded."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.providers.base import EncodeError
from gateway.providers.openai_compat.adapter import HELD
from gateway.transcript.model import Image, Message, Role, Text, ToolCall, ToolResult
from gateway.transcript.model import Request as Req
from tests.providers.test_openai_compat import ADAPTERS, target

IDS = st.sampled_from(["call_1", "call_2", 'c"3'])
TEXTS = st.sampled_from(["", " ", "done", 'é\n"x"\\', "\x00\x1f\u2028"])
RESULT = st.builds(
    ToolResult,
    IDS,
    TEXTS,
    is_error=st.booleans(),
    images=st.sampled_from([(), (Image("https://x.example/a.png"),)]),
)
CALL = st.builds(
    ToolCall, IDS, st.sampled_from(["f", "g"]), st.sampled_from(["", "{}", '{"a":1}']), custom=st.booleans()
)
MESSAGE = st.one_of(
    st.builds(lambda r: Message(Role.TOOL, (r,)), RESULT),
    st.builds(lambda rs: Message(Role.TOOL, tuple(rs)), st.lists(RESULT, max_size=3)),
    st.builds(lambda c: Message(Role.ASSISTANT, (c,)), CALL),
    st.builds(
        lambda bs: Message(Role.ASSISTANT, tuple(bs)),
        st.lists(st.one_of(CALL, st.builds(Text, TEXTS)), max_size=3),
    ),
    st.builds(lambda t: Message(Role.USER, (Text(t),)), TEXTS),
    st.just(Message(Role.TOOL, (Text("not a result"),))),
)


def _by_methods(adapter: Any, messages: tuple[Message, ...], tgt: Any) -> list[Any] | str:
    """The wire messages the methods make, one message at a time (or the first error)."""
    encoder = adapter._encoder
    names = {b.id: b.name for m in messages for b in m.blocks if type(b) is ToolCall}
    out: list[Any] = []
    for position, message in enumerate(messages):
        try:
            if message.role is Role.ASSISTANT:
                out.append(encoder._assistant(message, tgt))
            else:
                encoder._message(message, tgt, names, out)
        except EncodeError as exc:
            return f"messages[{position}]: {exc}"
    return out


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
@settings(max_examples=60, deadline=None)
@given(messages=st.lists(MESSAGE, max_size=24), filler=st.integers(0, 16))
def test_common_messages_are_written_as_the_methods_write_them(kind, messages, filler):
    adapter = ADAPTERS[kind]
    tgt = target(kind, "thinker")
    # a user message in front, and enough of them to be held (gateway/providers/held_wire.py)
    listed = (*(Message(Role.USER, (Text(f"u{i}"),)) for i in range(filler + 1)), *messages)
    request = Req(model="m", messages=listed)
    want = _by_methods(adapter, listed, tgt)
    HELD.clear()
    try:
        body = orjson.loads(adapter.encode_request(request, tgt, "sk-test").body)
    except EncodeError as exc:
        assert str(exc) == want
        return
    assert not isinstance(want, str), want
    assert orjson.dumps(body["messages"]) == orjson.dumps(want)
