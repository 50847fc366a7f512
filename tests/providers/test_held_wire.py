"""A conversation's rendered messages held for its next turn (gateway/providers/held_wire.py):
whatever was held before (a shorter turn, a turn that went on differently, another dialect's or
target's rendering of the same messages), every family that uses it sends exactly the bytes it
sends with nothing held, and refuses exactly what it refuses."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.providers import KINDS, anthropic_content, get_adapter, held_wire
from gateway.providers.base import EncodeError
from gateway.providers.openai_compat import adapter as chat
from gateway.providers.openai_compat.adapter import ChatAdapter
from gateway.repair import prepare
from gateway.transcript.model import Message, Request, Role, Text, ToolCall, ToolResult, replace
from tests.property.test_rich_content import rich_requests
from tests.property.transcripts import requests, target_for

CHAT_KINDS = [k for k in KINDS if isinstance(get_adapter(k), ChatAdapter)]
HELD_KINDS = [*CHAT_KINDS, "anthropic"]
HELDS = (chat.HELD, anthropic_content.HELD)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _send(request: Request, kind: str) -> bytes | str:
    target = target_for(kind)
    try:
        return get_adapter(kind).encode_request(request, target, "k").body
    except EncodeError as exc:
        return f"refused: {exc}"


def _cold(request: Request, kind: str, monkeypatch: pytest.MonkeyPatch) -> bytes | str:
    with monkeypatch.context() as m:
        m.setattr(held_wire, "MIN_MESSAGES", 10**9)
        return _send(request, kind)


def _prepared(request: Request, kind: str) -> Request:
    return prepare(request, target_for(kind), get_adapter(kind).capabilities).request


def _check(request: Request, kind: str, other: str, cut: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(held_wire, "MIN_MESSAGES", 1)
    for held in HELDS:
        held.clear()
    messages = request.messages
    cut = min(cut, len(messages))
    want = _cold(request, kind, monkeypatch)
    # what earlier turns may have left: the same messages for another dialect, a turn that went
    # on differently after `cut`, the turn's own first part
    _send(request, other)
    went_on = replace(request, messages=messages[:cut] + messages[cut:][::-1] + messages[:1])
    assert _send(went_on, kind) == _cold(went_on, kind, monkeypatch)
    shorter = replace(request, messages=messages[:cut])
    if shorter.messages:
        assert _send(shorter, kind) == _cold(shorter, kind, monkeypatch)
    assert _send(request, kind) == want
    assert _send(request, kind) == want  # all of it held


@SETTINGS
@given(st.data(), st.sampled_from(HELD_KINDS), st.sampled_from(HELD_KINDS), st.integers(0, 12))
def test_held_renderings_send_the_same_bytes_for_agent_transcripts(data, kind, other, cut):
    request = _prepared(data.draw(requests(target_for(kind), False)), kind)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _check(request, kind, other, cut, monkeypatch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(HELD_KINDS), st.sampled_from(HELD_KINDS), st.integers(0, 12))
def test_held_renderings_send_the_same_bytes_for_rich_transcripts(data, kind, other, cut):
    request = _prepared(data.draw(rich_requests(target_for(kind))), kind)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _check(request, kind, other, cut, monkeypatch)


@pytest.mark.parametrize("kind", HELD_KINDS)
def test_a_long_agent_session_renders_only_its_new_messages(kind, monkeypatch):
    """Turn after turn of a 40-message session (above MIN_MESSAGES) the bytes are those rendered
    from nothing, and the held prefix is not rendered again (its messages' encoding is not called)."""
    for held in HELDS:
        held.clear()
    messages: list[Message] = [Message(Role.USER, (Text("task"),))]
    for n in range(20):
        messages.append(Message(Role.ASSISTANT, (Text(f"step {n}"), ToolCall(f"call_{n}", "f", "{}"))))
        messages.append(Message(Role.TOOL, (ToolResult(f"call_{n}", f"result {n}"),)))
    adapter = get_adapter(kind)
    encoded: list[object] = []  # the messages (chat) or blocks (Messages) encoded
    if kind == "anthropic":
        owner, names, renders_all = anthropic_content, ("_block",), False
    else:  # an assistant message goes to `_assistant` (from `_message` or not), the others to `_message`
        owner, names, renders_all = (
            type(adapter._encoder),
            ("_message", "_assistant"),
            adapter.dialect.tool_message_name,
        )

    def counting(real):
        def count(*args):
            item = args[1] if owner is not anthropic_content else args[0]
            if not encoded or encoded[-1] is not item:  # once when `_message` hands it on
                encoded.append(item)
            return real(*args)

        return count

    for turn in range(3):
        request = Request("m", tuple(messages), system=(Text("Be terse."),))
        want = _cold(request, kind, monkeypatch)
        encoded.clear()
        with monkeypatch.context() as m:
            for name in names:
                m.setattr(owner, name, counting(getattr(owner, name)))
            assert _send(request, kind) == want
        if turn and not renders_all:
            newest = messages[-2:]
            assert encoded == (newest if kind != "anthropic" else [b for m in newest for b in m.blocks])
        # two blocks each: a message of one text block the Chat encoder writes in its loop, not
        # by the methods counted
        messages.append(Message(Role.ASSISTANT, (Text(f"more {turn}"), Text("."))))
        messages.append(Message(Role.USER, (Text(f"go on {turn}"), Text("."))))


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), _json, max_size=4),
    st.dictionaries(st.text(max_size=4), _json, max_size=4),
    st.lists(_json, max_size=4),
    st.booleans(),
    st.sampled_from([1, 10**9]),
)
def test_a_list_joined_into_its_body_is_the_body_written_with_it(before, after, items, nul, least):
    """`Rendered.dumps`: the body written around the list (its one NUL the list's place) is the
    body orjson writes with the list's text as a fragment; a fragment holding a NUL of its own
    (never orjson's text) leaves it to orjson. So is a short list's (`least`: `MIN_MESSAGES` above
    its length: held nowhere, written with the body at once)."""
    wire = held_wire.HeldWire(1 << 20)
    messages = (Message(Role.USER, (Text("a"),)),)

    def encode(listed, start, out):
        for _ in listed[start:]:
            out.extend(items)

    body = {**before, "messages": held_wire.PLACE, **{f"{k}_": v for k, v in after.items()}}
    if nul:  # before the list's place: the first NUL in the text is not it
        body = {"raw": orjson.Fragment(b'"\0"'), **body}
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(held_wire, "MIN_MESSAGES", least)
        text = wire.rendered(messages, None, [], encode).text()
        want = orjson.dumps({**body, "messages": orjson.Fragment(text)})
        assert wire.rendered(messages, None, [], encode).dumps(dict(body)) == want
        # held (the body's bytes), what the next turn goes on from
        assert wire.rendered(messages, None, [], encode).text() == text


def _nested(depth: int) -> object:
    value: object = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("least", [1, 10**9])
def test_a_list_nested_to_orjsons_limit_is_joined_into_its_body_as_before(least):
    """A list written afresh is written with its body in one `orjson.dumps`, one level deeper than
    written alone: a list at orjson's nesting limit is then written alone and joined, as before
    (the same bytes, no refusal)."""
    deepest = next(n for n in range(1, 1000) if _fails(lambda n=n: orjson.dumps(_nested(n + 1))))
    items = [_nested(deepest - 1)]  # written alone at the limit, one level past it in a body
    orjson.dumps(items)
    assert _fails(lambda: orjson.dumps({"messages": items}))
    wire = held_wire.HeldWire(1 << 20)
    messages = (Message(Role.USER, (Text("a"),)),)

    def encode(listed, start, out):
        for _ in listed[start:]:
            out.extend(items)

    body = {"model": "m", "messages": held_wire.PLACE}
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(held_wire, "MIN_MESSAGES", least)
        sent = wire.rendered(messages, None, [], encode).dumps(dict(body))
        text = orjson.dumps(items)
        assert sent == b'{"model":"m","messages":' + text + b"}"
        assert wire.rendered(messages, None, [], encode).text() == text  # held


def _fails(write) -> bool:
    try:
        write()
    except orjson.JSONEncodeError:
        return True
    return False
