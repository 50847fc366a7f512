"""A short Chat request decoded without the memo's per-item bookkeeping (gateway/ingress/chat/decode.py
`_short`: no items given, fewer messages than the fold resumes) decodes as the general path does
with items none of which is known: the same request, the same ignored-token count, the same error."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.chat import decode as chat_decode
from gateway.ingress.chat.decode import DecodeStats, decode_request
from gateway.ingress.chat.typed import TYPED
from gateway.ingress.errors import ClientError
from gateway.ingress.memo import fresh_items
from gateway.transcript.resume import MIN_MESSAGES
from gateway.transcript.seal import Sealer
from tests.ingress.test_chat_head import heads
from tests.ingress.test_chat_plain import _message

SEALER = Sealer(b"test-secret")

_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
_TOOLS = st.sampled_from(
    [
        None,
        [],
        [_TOOL],
        [_TOOL, _TOOL],
        [{"type": "function"}],
        "x",
        [{**_TOOL, "cache_control": {"type": "ephemeral"}}],
    ]
)
_UNSUPPORTED = st.sampled_from(
    [
        {},
        {"logprobs": False},
        {"logprobs": True},
        {"functions": []},
        {"modalities": ["text"]},
        {"audio": None},
    ]
)
_SPECIAL = st.sampled_from(
    [
        {
            "role": "system",
            "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
        },
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}],
        },
        {"role": "system", "content": ""},
        {"role": "assistant", "content": "x", "reasoning_details": [{"type": "reasoning.text", "text": "t"}]},
    ]
)


def _outcome(body: dict[str, Any], general: bool) -> Any:
    stats = DecodeStats()
    messages = body.get("messages")
    items = fresh_items(len(messages)) if general and type(messages) is list else None
    try:
        request = decode_request(body, SEALER, stats, items)
    except ClientError as exc:
        return ("error", exc.status, str(exc), exc.param, exc.code)
    return request, stats.ignored_tokens


# built once, not at every draw (a strategy built in a draw is validated again each time)
_HEADS = heads()
_MESSAGES = st.lists(_message() | _SPECIAL, min_size=1, max_size=MIN_MESSAGES - 1)


@st.composite
def _bodies(draw: st.DrawFn) -> dict[str, Any]:
    body = draw(_HEADS)
    body["messages"] = draw(_MESSAGES)
    tools = draw(_TOOLS)
    if tools is not None or draw(st.booleans()):
        body["tools"] = tools
    body.update(draw(_UNSUPPORTED))
    return body


@settings(max_examples=600, deadline=None)
@given(_bodies())
def test_a_short_request_decodes_as_the_general_path_does(body: dict[str, Any]) -> None:
    assert _outcome(body, general=False) == _outcome(body, general=True)


def test_the_short_path_is_the_one_taken_and_only_below_the_folds_length(monkeypatch: Any) -> None:
    taken: list[int] = []
    short = chat_decode._short
    monkeypatch.setattr(
        chat_decode, "_short", lambda body, raw, *a: taken.append(len(raw)) or short(body, raw, *a)
    )
    few = [{"role": "system", "content": "s"}, {"role": "user", "content": "go"}]
    many = [{"role": "user", "content": str(i)} for i in range(MIN_MESSAGES)]
    for messages in (few, many):
        body = {"model": "m", "messages": messages}
        assert _outcome(body, general=False) == _outcome(body, general=True)
    assert taken == [2]  # and the general path's result alike: neither reaches `_short`


def test_messages_read_into_their_structs_decode_as_their_dicts_do() -> None:
    messages = [
        {"role": "developer", "content": "d"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "out"},
        {"role": "system", "content": ""},
    ]
    typed = TYPED.decoder.decode(msgspec.json.encode(messages))
    as_dicts = _outcome({"model": "m", "messages": messages}, general=True)
    assert _outcome({"model": "m", "messages": typed}, general=False) == as_dicts
    assert _outcome({"model": "m", "messages": typed}, general=True) == as_dicts
