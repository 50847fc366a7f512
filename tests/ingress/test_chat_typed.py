"""A Chat body whose messages msgspec reads into the plain shapes' Structs at first sight
(gateway/ingress/typed_items.py, gateway/ingress/chat/typed.py) parses and decodes as it does by
orjson whole: the same request, ignored tokens and usage option, or the same error, whatever the
body's formatting, duplicate keys, escapes, encoding or depth limit."""

from __future__ import annotations

import importlib
import json
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from gateway.config import ServerConfig
from gateway.ingress.budget import item_parts, value_bound
from gateway.ingress.chat.codec import CODEC
from gateway.ingress.chat.typed import TYPED, Assistant, Tool, User
from gateway.ingress.errors import ClientError
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.slices import list_span
from gateway.ingress.split import parse_transcript
from gateway.ingress.typed_items import _OUTSIDES, _outside_of, typed_body, typed_read
from gateway.repair.holds import holds
from gateway.transcript.resume import MIN_MESSAGES
from gateway.transcript.seal import Sealer

from .test_chat_plain import _message

SEALER = Sealer(b"test-secret")
# the module, not the function `gateway.repair` names after it
holds_module = importlib.import_module("gateway.repair.holds")

_plain_texts = st.sampled_from(
    ["", "hi", "Step 1: look at a file", "héllo ✓", "tab\there", "\ud800x"]
) | st.text(max_size=5)


# The strategies a composite draws from, built once: a strategy built inside a draw is validated
# again at every draw (about a quarter of these tests' CPU); the same strategies, the same draws.
_ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "assistant"])
_CALL_IDS = st.sampled_from(["call_1", "call_2"])
_PLAIN_OR_NONE = st.one_of(_plain_texts, st.none())
_CALL_NAMES = st.sampled_from(["read", "édit"])
_ARGUMENTS = st.sampled_from(['{"path": "a.py"}', "", " \n", "\u00a0", "{bad", "[1]", " 7 ", "1 2"])
_IDS_AT = [st.sampled_from([f"call_{i}", "call_0"]) for i in range(2)]
_ZERO_TO_TWO = st.integers(0, 2)


@st.composite
def _plain_message(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly the shapes the typed path reads (so that whole bodies of them are drawn)."""
    role = draw(_ROLES)
    message: dict[str, Any] = {"role": role}
    if role == "tool":
        message["tool_call_id"] = draw(_CALL_IDS)
    if role != "assistant" or draw(st.booleans()):
        message["content"] = draw(_PLAIN_OR_NONE if role == "assistant" else _plain_texts)
    if role == "assistant":
        if draw(st.booleans()):
            calls = []
            for i in range(draw(_ZERO_TO_TWO)):
                function: dict[str, Any] = {"name": draw(_CALL_NAMES)}
                if draw(st.booleans()):
                    function["arguments"] = draw(_ARGUMENTS)
                call: dict[str, Any] = {"id": draw(_IDS_AT[i]), "function": function}
                if draw(st.booleans()):
                    call["type"] = "function"
                calls.append(call)
            message["tool_calls"] = calls
        for name in ("refusal", "reasoning_content"):
            if draw(_ZERO_TO_TWO) == 0:
                message[name] = draw(_PLAIN_OR_NONE)
    return message


_PLAIN_MESSAGE = _plain_message()
_ODD = st.sampled_from(["", None, 5, [], {}, "custom", [{"type": "text", "text": "t"}]])
_ADDED = st.sampled_from(
    ["name", "cache_control", "type", "strict", "extra_content", "content", "tool_call_id", "refusal"]
)
_ZERO_TO_THREE = st.integers(0, 3)


@st.composite
def _near_plain(draw: st.DrawFn) -> dict[str, Any]:
    """A plain message with one edit (a value of another type or an empty one, a key added or
    taken away), in it or in its call: the edge of what the Structs accept."""
    message = draw(_PLAIN_MESSAGE)
    places: list[dict[str, Any]] = [message]
    if message["role"] == "assistant" and draw(_ZERO_TO_THREE):
        function = {"name": "read", "arguments": "{}"}
        call = {"id": "call_9", "type": "function", "function": function}
        message["tool_calls"] = [call]
        places += [call, function]
    edit = draw(_ZERO_TO_TWO)
    if edit == 1:
        draw(st.sampled_from(places))[draw(_ADDED)] = draw(_ODD)
        return message
    target, key = draw(st.sampled_from([(place, key) for place in places for key in sorted(place)]))
    if edit == 0:
        target[key] = draw(_ODD)
    else:
        del target[key]
    return message


_heads = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["m", "", 5]),
        "stream": st.sampled_from([True, False, "yes"]),
        "stream_options": st.sampled_from([{"include_usage": True}, None]),
        "temperature": st.sampled_from([0.5, 3.0, "hot"]),
        "tools": st.sampled_from(
            [[{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}], "x"]
        ),
        "n": st.sampled_from([1, 2]),
        "logprobs": st.sampled_from([False, True]),
    },
)


def _dumps(value: Any, style: int) -> bytes:
    """`value` as a client writes it: compact, Python's default separators, indented, or ASCII
    with escapes; a lone surrogate only by the styles that can write one."""
    if style == 0:
        try:
            return orjson.dumps(value)
        except orjson.JSONEncodeError:
            style = 3
    if style == 1:
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if style == 2:
        return json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(value).encode()


# what a member of the body may be written as before the one kept (a duplicate key), or instead
# of the key's plain spelling
_EARLIER = st.sampled_from([b'"\xff"', b"1e400", b"[]", b'"m"', b'{"a": 1}', b"1" * 400])
_PLAIN_MESSAGES = st.lists(_PLAIN_MESSAGE, min_size=0, max_size=6)
_ANY_MESSAGE = st.one_of(_near_plain(), _message())
_TWISTS = st.integers(0, 11)
_LEADING = st.sampled_from([b" ", b"\n", b""])
_TRAILING = st.sampled_from([b" ", b"\n ", b"x"])


@st.composite
def _body(draw: st.DrawFn) -> bytes:
    messages = draw(_PLAIN_MESSAGES)
    if not messages or draw(st.booleans()):  # one message of any shape, plain or not, among them
        messages.insert(draw(st.integers(0, len(messages))), draw(_ANY_MESSAGE))
    head = {"model": "m", **draw(_heads)}
    style = draw(_ZERO_TO_THREE)
    members = [
        (_dumps(key, style), _dumps(value, style)) for key, value in {**head, "messages": messages}.items()
    ]
    members = draw(st.permutations(members))
    twist = draw(_TWISTS)
    if twist == 1:  # a key given twice: the earlier value is one orjson may refuse
        at = draw(st.integers(0, len(members) - 1))
        members.insert(at, (members[at][0], draw(_EARLIER)))
    elif twist == 2:  # a key written with an escape (the same key to a JSON reader)
        at = draw(st.integers(0, len(members) - 1))
        key = members[at][0]
        members[at] = (key[:2] + b"\\u%04x" % key[2] + key[3:] if len(key) > 3 else key, members[at][1])
    elif twist == 3:  # a key given twice with the same value
        at = draw(st.integers(0, len(members) - 1))
        members.append(members[at])
    space = b" " if style else b""
    body = b"{" + (b"," + space).join(k + b":" + space + v for k, v in members) + b"}"
    if twist == 4:
        body = draw(_LEADING) + body + draw(_TRAILING)
    return body


def _outcome(raw: bytes, depth: int, typed: bool) -> Any:
    limits = ServerConfig(max_json_depth=depth)
    memo = DecodeMemo(8 << 20, min_bytes=0)  # first sight: parsed whole, or read typed
    extra = {"typed": CODEC.typed_items} if typed else {}
    try:
        body, items = parse_transcript(
            raw, "messages", memo, "s", limits, value_bound(raw, 0, len(raw)), **extra
        )
        inbound = CODEC.decode(body, {}, SEALER, items)
    except ClientError as exc:
        return ("error", exc.status, str(exc), exc.param, exc.code)
    return inbound.request, inbound.ignored_tokens, inbound.context


@settings(max_examples=300, deadline=None)
@given(_body(), st.sampled_from([2, 5, 6, 7, 64, 64]))
def test_a_body_parses_and_decodes_the_same_read_typed_or_parsed_whole(raw: bytes, depth: int) -> None:
    event("read typed" if typed_body(raw, "messages", TYPED, depth) is not None else "parsed whole")
    assert _outcome(raw, depth, typed=True) == _outcome(raw, depth, typed=False)


def test_an_agents_plain_messages_are_read_typed_and_other_bodies_are_not() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "out"},
    ]
    raw = orjson.dumps({"model": "m", "messages": messages})
    body = typed_body(raw, "messages", TYPED, 64)
    assert body is not None
    assert [type(m) for m in body["messages"]] == [User, Assistant, Tool]
    assert body["model"] == "m"
    assert typed_body(raw, "messages", TYPED, 5) is None  # the call's function nests at depth 6
    for other in (
        {**messages[0], "content": [{"type": "text", "text": "go"}]},
        {**messages[2], "tool_call_id": ""},
        {**messages[1], "tool_calls": [{**call, "extra_content": {}}]},
        {**messages[1], "tool_calls": [{**call, "type": None}]},
    ):
        assert typed_body(orjson.dumps({"model": "m", "messages": [other]}), "messages", TYPED, 64) is None
    twice = b'{"model": "\xff", "model": "m", "messages": ' + orjson.dumps(messages) + b"}"
    assert typed_body(twice, "messages", TYPED, 64) is None
    # a key written with escapes is the key it stands for (as the whole parse reads it)
    escaped = b'{"mod\\u0065l": "m", "messages": ' + orjson.dumps(messages) + b"}"
    assert typed_body(escaped, "messages", TYPED, 64) == body
    assert isinstance(TYPED.decoder, msgspec.json.Decoder)


@settings(max_examples=800, deadline=None)
@given(_near_plain(), _plain_message())
def test_a_message_at_the_edge_of_the_plain_shapes_decodes_the_same(
    message: dict[str, Any], other: dict[str, Any]
) -> None:
    raw = _dumps({"model": "m", "messages": [other, message]}, 0)
    event("read typed" if typed_body(raw, "messages", TYPED, 64) is not None else "parsed whole")
    assert _outcome(raw, 64, typed=True) == _outcome(raw, 64, typed=False)


@settings(max_examples=100, deadline=None)
@given(_body())
def test_items_read_typed_count_their_parts_as_the_list_walk_would(raw: bytes) -> None:
    # first sight takes a typed item as one part, without walking the list: what item_parts gives
    limits = ServerConfig()
    assume(typed_body(raw, "messages", TYPED, limits.max_json_depth) is not None)
    memo = DecodeMemo(8 << 20, min_bytes=0)
    bound = value_bound(raw, 0, len(raw))
    body, items = parse_transcript(raw, "messages", memo, "s", limits, bound, typed=CODEC.typed_items)
    assert items is not None and all(type(v) in TYPED.kinds for v in body["messages"])
    assert items._parts == [item_parts(v) for v in body["messages"]]


@settings(max_examples=300, deadline=None)
@given(_body())
def test_a_body_read_typed_knows_where_its_list_is_as_list_span_finds_it(raw: bytes) -> None:
    # the next turn goes on from the span the first sight kept (gateway/ingress/memo_chain.py)
    read = typed_read(raw, "messages", TYPED, 64)
    assert (read is None) == (typed_body(raw, "messages", TYPED, 64) is None)
    event("read typed" if read is not None else "parsed whole")
    if read is not None:
        assert read[1] == list_span(raw, "messages")


def _first_sight_records(raw: bytes, typed: bool) -> tuple[Any, list[Any]]:
    memo = DecodeMemo(8 << 20, min_bytes=0)
    extra = {"typed": CODEC.typed_items} if typed else {}
    body, items = parse_transcript(
        raw, "messages", memo, "s", ServerConfig(), value_bound(raw, 0, len(raw)), **extra
    )
    assert (items is not None and items._body is not None) == typed  # read typed, or parsed whole
    try:
        outcome: Any = CODEC.decode(body, {}, SEALER, items).request
    except ClientError as exc:
        outcome = ("error", str(exc), exc.param)
    (sight,) = memo._probation.values()  # a long transcript's first sight waits whole
    return outcome, sight.records


@pytest.mark.parametrize("bad", [None, 0, 41, 99])
def test_a_long_first_sight_read_typed_keeps_what_its_messages_decode_to_as_parsed_whole(
    bad: int | None,
) -> None:
    # the typed path decodes a long transcript in one loop: it keeps each message's decoded value
    # for the next turn as the item-by-item decode does, and those before one that raises
    from bench.workloads import agent_messages

    messages = agent_messages(100, "records")
    if bad is not None:
        messages[bad] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "read", "arguments": "{bad"}}
            ],
        }
    raw = orjson.dumps({"model": "m", "messages": messages})
    typed, whole = _first_sight_records(raw, typed=True), _first_sight_records(raw, typed=False)
    assert typed == whole
    outcome, records = typed
    assert records[:bad] == [r for r in records[:bad] if r is not None]  # every one before kept
    if bad is not None:
        assert outcome[2] == f"messages[{bad}].tool_calls[0].function.arguments"
        assert records[bad:] == [None] * (len(messages) - bad)


# what may stand where the list of a body read typed stood, between the same bytes: another list,
# or text that only looks like one at its ends (a member after it, a second value, no list)
_LISTS = st.lists(_plain_message(), max_size=4).map(lambda messages: _dumps(messages, 0))
_MIDDLES = _LISTS | st.sampled_from(
    [
        b'[],"model":[1]',
        b'[{"role": "user", "content": "a"}], "messages": []',
        b'[], "x": [{"role": "user", "content": "b"}]',
        b"[] []",
        b"[1]",
        b'[{"role": "user", "content": "\xff"}]',
        b"[ ]",
        b"[{}]",
        b"[",
    ]
)


_ZERO_TO_FOUR = st.integers(0, 4)


@st.composite
def _outside(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """The bytes of a body before its list and after it: its other fields, some before the list
    and some after, written in one of the clients' styles (a key given twice at times)."""
    head = {"model": "m", **draw(_heads)}
    style = draw(_ZERO_TO_THREE)
    members = [
        _dumps(key, style) + b":" + (b" " if style else b"") + _dumps(value, style)
        for key, value in head.items()
    ]
    members = draw(st.permutations(members))
    if members and draw(_ZERO_TO_FOUR) == 0:
        members.append(draw(st.sampled_from(members)))
    cut = draw(st.integers(0, len(members)))
    comma = b", " if style else b","
    before = b"{" + b"".join(m + comma for m in members[:cut]) + b'"messages":' + (b" " if style else b"")
    return before, b"".join(comma + m for m in members[cut:]) + b"}"


@settings(max_examples=400, deadline=None)
@given(_outside(), _outside(), _LISTS, _MIDDLES, st.sampled_from([6, 64]), st.integers(0, 7))
def test_a_body_with_the_outside_of_one_read_typed_reads_as_it_does_alone(
    outside: tuple[bytes, bytes],
    another: tuple[bytes, bytes],
    first: bytes,
    text: bytes,
    depth: int,
    mix: int,
) -> None:
    # a cold turn of another conversation of the same agent: its fields (model, tools,
    # parameters) as the last one's, its list not; read without reading its fields again, or
    # parsed whole (None) where the bytes between are not one list. Or the bytes before or after
    # its list another body's: read as that body is.
    (head, tail), (other_head, other_tail) = outside, another
    raw = head + first + tail
    scope = f"outside {raw!r}"
    assume(typed_read(raw, "messages", TYPED, depth, scope) is not None)
    if mix & 4:  # the same length, a value changed (another model)
        other_head, other_tail = (
            b.replace(b':"m"', b':"x"').replace(b': "m"', b': "x"') for b in (head, tail)
        )
    other = (other_head if mix & 1 else head) + text + (other_tail if mix & 2 else tail)
    found = _outside_of(other, _OUTSIDES.get((scope, "messages"), ()))
    assert found is not None or not (text[:1] == b"[" and text[-1:] == b"]" and mix & 3 == 0)
    event("outside found" if found is not None else "outside not found")
    alone = typed_read(other, "messages", TYPED, depth)
    read = typed_read(other, "messages", TYPED, depth, scope)
    event("read typed" if read is not None else "parsed whole")
    # another body's outside found by its ends alone (the same head, a tail that ends as this
    # one's) puts more than the list between them: msgspec refuses it, and the body's own list is
    # found as it is without that outside (what the scope read before does not decide)
    assert read == alone
    _outcome(raw, depth, typed=True)  # its outside remembered in the scope the outcome reads in
    assert _outcome(other, depth, typed=True) == _outcome(other, depth, typed=False)


def test_an_agents_next_conversation_is_read_without_its_fields_read_again_in_its_scope_only() -> None:
    from bench import workloads

    tools = workloads.tools()
    first, second = (
        workloads.agent_body("m", workloads.agent_messages(30, seed), tools) for seed in ("one", "two")
    )
    assert typed_read(first, "messages", TYPED, 64, "chat\0tenant") is not None
    assert _outside_of(second, _OUTSIDES.get(("chat\0other", "messages"), ())) is None
    assert _outside_of(second, _OUTSIDES[("chat\0tenant", "messages")]) is not None
    read = typed_read(second, "messages", TYPED, 64, "chat\0tenant")
    assert read is not None and read == typed_read(second, "messages", TYPED, 64)
    assert read[1] == list_span(second, "messages")


_TEXTS = st.sampled_from(["hi", "x y"])
_BLANKISH = st.sampled_from(["", " ", "\n\t", "hi"])
_AGENT_ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "assistant", "tool"])
_OR_NONE = {texts: st.one_of(texts, st.none()) for texts in (_TEXTS, _BLANKISH)}


@st.composite
def _agent_message(draw: st.DrawFn, texts: st.SearchStrategy[str] = _TEXTS) -> dict[str, Any]:
    """A plain message of a long transcript, its texts from `texts`."""
    role = draw(_AGENT_ROLES)
    if role == "tool":
        return {"role": "tool", "tool_call_id": "call_1", "content": draw(texts)}
    if role != "assistant":
        return {"role": role, "content": draw(texts)}
    or_none = _OR_NONE[texts]
    message: dict[str, Any] = {"role": "assistant", "content": draw(or_none)}
    calls = draw(_ZERO_TO_TWO)
    if calls or draw(st.booleans()):
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            for i in range(calls)
        ]
    for name in ("refusal", "reasoning_content"):
        if draw(st.booleans()):
            message[name] = draw(or_none)
    return message


@st.composite
def _agent_messages(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A long transcript with text, and a message or two whose text may be empty or blank (what
    the holds walk looks for), anywhere: among the opening instructions too."""
    messages = draw(_AGENT_LIST)
    if draw(st.booleans()):
        messages[:0] = draw(_OPENINGS)
    for _ in range(draw(_ZERO_TO_TWO)):
        messages[draw(st.integers(0, len(messages) - 1))] = draw(_ODD_AGENT_MESSAGE)
    return messages


# the shapes whose text decides whether a message is blank: empty, white, given elsewhere
_EDGES = [
    {"role": "assistant", "content": ""},
    {"role": "assistant", "content": " "},
    {"role": "assistant", "content": "", "reasoning_content": "r"},
    {"role": "assistant", "content": "", "reasoning_content": ""},
    {"role": "assistant", "content": None, "refusal": " "},
    {"role": "assistant", "content": "", "refusal": "no"},
    {"role": "assistant", "content": "", "tool_calls": []},
    {"role": "user", "content": ""},
    {"role": "user", "content": " \n"},
    {"role": "system", "content": " "},
    {"role": "developer", "content": ""},
    {"role": "tool", "tool_call_id": "call_1", "content": ""},
]
_AGENT_LIST = st.lists(_agent_message(), min_size=MIN_MESSAGES, max_size=MIN_MESSAGES + 8)
_OPENINGS = st.lists(
    st.sampled_from(["rules", " ", ""]).map(lambda text: {"role": "system", "content": text}),
    min_size=1,
    max_size=2,
)
_ODD_AGENT_MESSAGE = st.one_of(st.sampled_from(_EDGES), _agent_message(_BLANKISH))


@settings(max_examples=300, deadline=None)
@given(_agent_messages())
def test_what_a_long_transcript_read_typed_holds_is_what_the_holds_walk_finds(messages) -> None:
    raw = orjson.dumps({"model": "m", "messages": messages})
    assume(typed_body(raw, "messages", TYPED, 64) is not None)
    memo = DecodeMemo(8 << 20, min_bytes=0)
    try:
        body, items = parse_transcript(
            raw, "messages", memo, "s", ServerConfig(), value_bound(raw, 0, len(raw)), typed=CODEC.typed_items
        )
        request = CODEC.decode(body, {}, SEALER, items).request
    except ClientError:
        assume(False)
    kept = request.messages
    if len(kept) < MIN_MESSAGES:  # the opening instructions went to `system`: too few to hold
        assert holds_module._SO_FAR.find(kept, None) == (0, None)
        return
    assert holds_module._SO_FAR.find(kept, None)[0] == len(kept)  # held by the decode
    read = holds(kept)
    event(f"blank {read.blank}, reasoning {read.reasoning}")
    holds_module._SO_FAR.clear()
    assert read == holds(kept)  # walked


def test_a_body_whose_ends_only_look_like_a_remembered_outside_reads_typed_as_it_does_alone() -> None:
    # what made test_items_read_typed_count_their_parts_as_the_list_walk_would flaky: an earlier
    # example's outside in the same scope (`{"model": "m", "messages": ` and `}`) matched this
    # body's ends, with a member after its list; msgspec refused the text between, and the body
    # was parsed whole where, read in a fresh scope, it reads typed
    scope = "chat\0ends only"
    first = b'{"model": "m", "messages": [{"role": "user", "content": "a"}]}'
    second = b'{"model": "m", "messages": [{"role": "user", "content": "b"}], "n": [1]}'
    assert typed_read(first, "messages", TYPED, 64, scope) is not None
    assert _outside_of(second, _OUTSIDES[(scope, "messages")]) is not None
    alone = typed_read(second, "messages", TYPED, 64)
    assert alone is not None and typed_read(second, "messages", TYPED, 64, scope) == alone
    # an item the Structs refuse is refused as the read without the outside refuses it
    refused = b'{"model": "m", "messages": [{"role": "usr", "content": "b"}]}'
    assert _outside_of(refused, _OUTSIDES[(scope, "messages")]) is not None
    assert typed_read(refused, "messages", TYPED, 64) is None
    assert typed_read(refused, "messages", TYPED, 64, scope) is None
