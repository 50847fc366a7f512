"""The Chat request's head read by msgspec (gateway/ingress/chat/typed.py `typed_head`) accepts only
what pydantic's `ChatRequestHead` accepts, with the same values; what it refuses goes to pydantic,
so a request decodes the same and fails with the same error either way."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gateway.ingress.chat import decode as chat_decode
from gateway.ingress.chat import wire as w
from gateway.ingress.chat.codec import CODEC
from gateway.ingress.chat.typed import Head, typed_head
from gateway.ingress.errors import ClientError
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"test-secret")

# values of every JSON type, near each field's bounds, and of each field's own shapes
_ANY = st.sampled_from(
    [None, True, False, 0, 1, 2, -1, 3, 2**64, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, -0.1, "", "x", "auto", "none",
     "required", "low", "xhigh", "high ", [], ["x"], ["x", 1], {}, {"include_usage": True},
     {"include_usage": 1}, {"include_usage": False, "other": 1}, {"type": "function", "function": {"name": "f"}},
     {"type": "function", "function": {"name": 1}}, {"type": "other", "function": {"name": "f"}},
     {"function": {"name": "f"}}, {"type": "text"}, {"type": "json_object"}, "function"]
)  # fmt: skip
# each field's own shapes, valid or near it, mostly
_OWN: dict[str, list[Any]] = {
    "stream": [True, False, None],
    "stream_options": [None, {"include_usage": True}, {"include_usage": False, "other": 1}, {}],
    "tool_choice": ["auto", "none", "required", None, {"type": "function", "function": {"name": "f"}}],
    "parallel_tool_calls": [True, False, None],
    "reasoning_effort": ["none", "minimal", "low", "medium", "high", "xhigh", None],
    "max_tokens": [1, 100, None, 0],
    "max_completion_tokens": [1, 4096, None],
    "temperature": [0, 1, 2, 0.7, 1.0, 2.0, None, 2.0000001],
    "top_p": [0, 1, 0.9, 1.0, None, 1.5],
    "stop": ["x", ["x", "y"], [], None],
    "n": [1, 2, None],
    "response_format": [None, {"type": "text"}, {"type": "json_object"}],
    "user": ["u", 1],
    "metadata": [{"a": "b"}],
    "tools": [None, []],
}


# The strategies `heads` draws from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_MODELS = st.sampled_from(["m", "m", "", None, 1]) | st.text(max_size=3)
_ONE_IN_10 = st.integers(0, 9)
_OWN_NAMES = st.lists(st.sampled_from(sorted(_OWN)), max_size=5, unique=True)
_ONE_IN_5 = st.integers(0, 4)
_OWN_VALUES = {name: st.sampled_from(values) for name, values in _OWN.items()}
_ANY_VALUES = _ANY | st.floats(allow_nan=False, allow_infinity=False) | st.integers()


@st.composite
def heads(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {"model": draw(_MODELS)}
    if draw(_ONE_IN_10) == 0:
        del body["model"]
    for name in draw(_OWN_NAMES):
        if draw(_ONE_IN_5):
            body[name] = draw(_OWN_VALUES[name])
        else:
            body[name] = draw(_ANY_VALUES)
    body["messages"] = [{"role": "user", "content": "Hi."}]
    return body


_NAMES = [name for name in Head.__struct_fields__ if name != "response_format"]


@settings(max_examples=400)
@given(heads())
@example({"model": "m", "stream_options": {"type": "function", "function": {"name": "f"}}, "messages": []})
def test_the_typed_head_reads_what_pydantic_reads(body):
    typed = typed_head(body)
    try:
        wire = w.ChatRequestHead.model_validate(body)
    except ValidationError:
        assert typed is None  # refused by pydantic: never accepted by msgspec
        event("refused by both")
        return
    if typed is None:
        event("refused by msgspec only: pydantic's reading")
        return
    event("read by msgspec")
    assert wire.response_format is None
    for name in _NAMES:
        ours, theirs = getattr(typed, name), getattr(wire, name)
        # of a Struct, the fields decode reads (the models keep extra fields too: never read)
        if name == "stream_options" and theirs is not None:
            theirs, ours = theirs.include_usage, ours.include_usage
        elif name == "tool_choice" and not isinstance(theirs, str | None):
            theirs = theirs.model_dump(include={"type": True, "function": {"name"}})
            ours = msgspec.to_builtins(ours)
        assert ours == theirs and type(ours) is type(theirs), name


@settings(max_examples=200)
@given(heads())
def test_a_request_decodes_the_same_with_and_without_the_typed_head(body):
    def decode() -> Any:
        try:
            return CODEC.decode(body, {}, SEALER).request
        except ClientError as exc:
            return ("error", exc.status, str(exc), exc.param, exc.code)

    typed = decode()
    chat_decode.typed_head = lambda body: None
    try:
        assert decode() == typed
    finally:
        chat_decode.typed_head = typed_head
