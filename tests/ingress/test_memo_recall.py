"""A long first sight held whole (gateway/ingress/memo.py `first_sight`), read in parts when the
next request opens the same way: from that request's own items when they show the held body's
list exactly, else from the held body. Either way, every turn decodes and sends what it does
without the memo."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.workloads import agent_messages
from gateway.ingress import memo as memo_module
from gateway.ingress import slices
from gateway.ingress.budget import value_bound, value_bound_after
from gateway.ingress.chat.codec import CODEC as CHAT
from gateway.ingress.memo import SHORT_BODY, DecodeMemo
from gateway.ingress.slices import item_texts
from tests.ingress.test_memo import LIMITS, SEALER, TOOLS, _decode, _outbound, chat_message

LONG = memo_module._LONG_TRANSCRIPT


def _raw(messages: list[dict[str, Any]], spaced: bool) -> bytes:
    body = {"model": "m", "messages": messages, "tools": TOOLS}
    return json.dumps(body, indent=1).encode() if spaced else orjson.dumps(body)


@st.composite
def long_sessions(draw: Any) -> list[bytes]:
    """A resumed session's turns: a long first sight (or one a little short of long, which
    grows long), then turns that append, edit or drop an item of what the first sight held,
    or send it spaced out."""
    messages = agent_messages(LONG + draw(st.integers(-3, 8)), "recall")
    turns = [_raw(messages, draw(st.booleans()))]
    for _ in range(draw(st.integers(1, 4))):
        step = draw(st.sampled_from(["append", "append", "again", "edit", "drop"]))
        if step == "append":
            messages = [*messages, *draw(st.lists(chat_message(), min_size=1, max_size=2))]
        elif step == "again":  # the same list once more (a retried request)
            pass
        elif step == "edit":
            at = draw(st.integers(2, len(messages) - 1))
            messages = [*messages[:at], draw(chat_message()), *messages[at + 1 :]]
        else:
            at = draw(st.integers(2, len(messages) - 1))
            messages = [*messages[:at], *messages[at + 1 :]]
        turns.append(_raw(messages, draw(st.booleans())))
    return turns


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(long_sessions())
def test_a_long_first_sight_read_in_parts_sends_what_it_sends_without_the_memo(turns):
    memo = DecodeMemo(8 << 20)
    for raw in turns:
        cold = _decode(CHAT, raw, None)
        warm = _decode(CHAT, raw, memo)
        if isinstance(cold, tuple):  # an edit can make a message the decoder refuses
            assert warm == cold
            continue
        assert warm.request == cold.request and warm.ignored_tokens == cold.ignored_tokens
        assert _outbound(warm) == _outbound(cold)


def test_the_next_turns_items_stand_for_the_held_body_and_it_is_not_read_again(monkeypatch):
    messages = agent_messages(LONG + 3, "held")
    memo = DecodeMemo(8 << 20)
    _decode(CHAT, _raw(messages, False), memo)
    read: list[int] = []

    def counted(raw: bytes, field: str) -> list[bytes] | None:
        read.append(len(raw))
        return item_texts(raw, field)

    monkeypatch.setattr(slices, "item_texts", counted)
    hits = memo.hits
    _decode(CHAT, _raw([*messages, {"role": "user", "content": "Next."}], False), memo)
    assert memo.hits - hits == len(messages) and read == []
    # an edit of its last item: the held list is not how this one begins, so its items are read;
    # spaced out, the held body's list is not what the items show: read from the body itself
    other = agent_messages(LONG + 3, "spaced")
    _decode(CHAT, _raw(other, True), memo)
    hits = memo.hits
    _decode(CHAT, _raw([*other[:-1], {"role": "user", "content": "Edited."}], True), memo)
    assert memo.hits - hits == len(other) - 1 and len(read) == 1


def _spy_split(memo: DecodeMemo, monkeypatch: Any) -> list[int]:
    """The calls of `memo.split` (reading a request item by item), one 1 each, from now on."""
    calls: list[int] = []
    real = memo.split

    def split(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(memo, "split", split)
    return calls


def test_turns_going_on_from_a_held_one_are_compared_whole_not_read_item_by_item(monkeypatch):
    """A long first sight's next turns (gateway/ingress/memo.py `chain`): the held list's bytes
    are the new list's first ones, so no item of it is split, looked up or decoded again, and the
    new list is held in its place for the turn after; an edit of a held item falls back to
    reading items (and finds the others by their bytes)."""
    messages = agent_messages(LONG + 5, "chained")
    memo = DecodeMemo(8 << 20)
    for spaced in (False, True):
        _decode(CHAT, _raw(messages, spaced), memo)
        split_calls = _spy_split(memo, monkeypatch)
        turn = messages
        for step in range(3):
            hits = memo.hits
            turn = [*turn, {"role": "user", "content": f"Step {step}."}]
            inbound = _decode(CHAT, _raw(turn, spaced), memo)
            assert inbound.request == _decode(CHAT, _raw(turn, spaced), None).request
            assert memo.hits - hits == len(turn) - 1
        assert split_calls == []
        edited = [*turn[:-2], {"role": "user", "content": "Edited."}, turn[-1]]
        hits = memo.hits
        inbound = _decode(CHAT, _raw(edited, spaced), memo)
        assert inbound.request == _decode(CHAT, _raw(edited, spaced), None).request
        assert split_calls == [1] and memo.hits - hits == len(edited) - 1
        monkeypatch.undo()
        messages = agent_messages(LONG + 5, "chained spaced")


@pytest.mark.parametrize("typed", [True, False])
def test_a_turn_switching_model_goes_on_from_the_held_list_where_it_moved(monkeypatch, typed):
    """Codex switches model mid-session: a field before the list changes length, so the list
    stands elsewhere in the body. What the exchange does (gateway/exchange.py `_run`): the
    comparison made counting the body's values finds the held list by its key and is handed on
    to the read, which goes on from it (no item read again, no second comparison), each turn
    decoding as without the memo."""
    from gateway.ingress.split import parse_transcript

    messages = agent_messages(LONG + 5, "switching")
    memo = DecodeMemo(8 << 20)
    scope = f"{id(CHAT)}\0"

    def raw_of(turn: list[dict[str, Any]], model: str) -> bytes:
        return orjson.dumps({"model": model, "messages": turn, "tools": TOOLS})

    # read typed at first sight (where its list is, known), or parsed whole as the dialects without
    # typed items are (Responses, Gemini: found by the next turn's count)
    first = raw_of(messages, "m")
    bound = value_bound(first, 0, len(first))
    typed_items = CHAT.typed_items if typed else None
    body, items = parse_transcript(first, "messages", memo, scope, LIMITS, bound, typed=typed_items)
    CHAT.decode(body, {}, SEALER, items)
    split_calls = _spy_split(memo, monkeypatch)
    compared: list[int] = []
    real = slices.held_list_at
    monkeypatch.setattr(slices, "held_list_at", lambda *a: compared.append(1) or real(*a))
    turn = messages
    for step, model in enumerate(["a-much-longer-model", "short", "short", "m" * 40]):
        turn = [*turn, {"role": "user", "content": f"Step {step}."}]
        raw = raw_of(turn, model)
        held = memo.held_bound(scope, raw, "messages")
        assert held is not None
        values = value_bound_after(raw, held, 1 << 20)
        assert values == value_bound(raw, 0, len(raw))
        before, hits = len(compared), memo.hits
        body, items = parse_transcript(raw, "messages", memo, scope, LIMITS, values, shared=held)
        assert len(compared) == before  # compared once, when counted
        assert memo.hits - hits == len(turn) - 1
        assert CHAT.decode(body, {}, SEALER, items).request == _decode(CHAT, raw, None).request
    assert split_calls == []


def test_a_body_shorter_than_min_bytes_is_parsed_and_decoded_as_without_the_memo():
    """The gateway's memo leaves short bodies alone (`SHORT_BODY`): their few items cost less to
    decode than finding them; a longer body of the same conversation goes through the memo."""
    from gateway.ingress.split import parse_shared

    memo = DecodeMemo(1 << 20, min_bytes=SHORT_BODY)
    short = [{"role": "user", "content": "What is six times seven?"}]
    raw = orjson.dumps({"model": "m", "messages": short})
    assert len(raw) < SHORT_BODY
    for _ in range(3):
        warm = _decode(CHAT, raw, memo)
        assert warm.request == _decode(CHAT, raw, None).request
    assert memo.hits == memo.misses == 0 and len(memo) == 0 and not memo._seen
    with memo.lock:  # never taken for a short body: parsed at once though another thread holds it
        body, items = parse_shared(raw, "messages", memo, "scope", LIMITS, None, False)
    assert body == orjson.loads(raw) and items is None
    # nested past the depth limit: refused as the whole parse refuses it
    deep = b'{"model": "m", "messages": [{"role": "user", "content": ' + b"[" * 70 + b"]" * 70 + b"}]}"
    refused = _decode(CHAT, deep, DecodeMemo(1 << 20, min_bytes=SHORT_BODY))
    assert len(deep) < SHORT_BODY and refused[:2] == ("error", 400) and refused == _decode(CHAT, deep, None)
    longer = [*short, *agent_messages(8, "short")]
    raw = orjson.dumps({"model": "m", "messages": longer})
    assert len(raw) >= SHORT_BODY
    for _ in range(3):
        assert _decode(CHAT, raw, memo).request == _decode(CHAT, raw, None).request
    assert memo.hits == len(longer)


def test_a_conversation_grown_long_item_by_item_goes_on_from_its_held_list(monkeypatch):
    """A session that began short is read item by item (`split`); once its list is long, the
    list is held (gateway/ingress/memo_chain.py `hold`) and the next turn goes on from it."""
    memo = DecodeMemo(8 << 20)
    split_calls = _spy_split(memo, monkeypatch)
    messages = agent_messages(LONG - 4, "grown")
    read_item_by_item: list[bool] = []
    for step in range(6):
        messages = [*messages, {"role": "user", "content": f"Step {step}."}]
        raw = _raw(messages, False)
        before = len(split_calls)
        assert _decode(CHAT, raw, memo).request == _decode(CHAT, raw, None).request
        read_item_by_item.append(len(split_calls) > before)
    # a first sight of LONG - 3 items (parsed whole), two turns short of LONG and one of LONG
    # read item by item (that one held), then turns going on from the held list
    assert read_item_by_item == [False, True, True, True, False, False]


def test_a_first_sights_items_are_walked_at_their_depth():
    """At first sight every item is new: the list is walked once (the body at 1, the list at 2,
    an item at 3), refusing exactly what a whole walk refuses."""
    from gateway.ingress.errors import ClientError, check_depth
    from gateway.ingress.split import parse_transcript

    for nested in (LIMITS.max_json_depth - 3, LIMITS.max_json_depth - 2):
        # an item at depth 3 whose content holds `nested` more levels
        item = {"role": "user", "content": "x"}
        deep: Any = "leaf"
        for _ in range(nested):
            deep = [deep]
        item["extra"] = deep
        raw = orjson.dumps({"model": "m", "messages": [item]})
        try:
            check_depth(orjson.loads(raw), LIMITS.max_json_depth)
            whole = None
        except ClientError as exc:
            whole = str(exc)
        try:
            parse_transcript(raw, "messages", DecodeMemo(1 << 20), "scope", LIMITS)
            first = None
        except ClientError as exc:
            first = str(exc)
        assert first == whole and (whole is None) == (nested == LIMITS.max_json_depth - 3)


def test_a_turn_going_on_from_a_held_list_walks_its_new_items_at_their_depth():
    """A turn read as the held list and more (gateway/ingress/memo_chain.py) depth-checks only
    its new items, each where it stands, refusing exactly what the whole parse refuses."""
    messages = agent_messages(LONG + 3, "deep")
    refused = []
    for nested in (LIMITS.max_json_depth - 4, LIMITS.max_json_depth - 3, LIMITS.max_json_depth - 2):
        memo = DecodeMemo(8 << 20)
        for raw in (_raw(messages, False), _raw([*messages, {"role": "user", "content": "go"}], False)):
            _decode(CHAT, raw, memo)  # a first sight, then a turn read in parts: held
        deep: Any = "leaf"
        for _ in range(nested):
            deep = [deep]
        item = {"role": "user", "content": "x", "extra": deep}
        raw = _raw([*messages, {"role": "user", "content": "go"}, item], False)
        hits = memo.hits
        warm, cold = _decode(CHAT, raw, memo), _decode(CHAT, raw, None)
        refused.append(isinstance(cold, tuple))
        assert warm == cold if isinstance(cold, tuple) else warm.request == cold.request
        assert memo.hits >= hits + len(messages)  # the held list stood for its items
    assert refused == [False, False, True]  # the item at the limit taken, one level more refused
