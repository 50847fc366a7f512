"""The decode memo's bound of a held body (gateway/ingress/memo_size.py): a turn that goes on from
a held narrow body scans only the bytes around the run it shares with it, and is accounted exactly
as when scanned whole."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.workloads import agent_messages
from gateway.ingress import memo_chain
from gateway.ingress.budget import value_bound
from gateway.ingress.memo import _LONG_TRANSCRIPT, DecodeMemo
from gateway.ingress.memo_items import _FirstSight
from gateway.ingress.memo_size import body_turn_size, narrow, narrow_around
from gateway.ingress.split import parse_transcript
from tests.ingress.test_memo import CHAT, LIMITS, SEALER, TOOLS, _decode

# bytes that make a body wide (not ASCII, a \u escape) and their neighbours
_BYTES = st.lists(st.sampled_from([b"a", b"\\", b"u", b"n", b'"', b"\xc3", b"\xa9", b"0"]), max_size=12)


@given(_BYTES, st.lists(st.sampled_from([b"a", b"\\", b"u", b"n"]), max_size=12), _BYTES)
def test_narrow_around_a_known_narrow_run_is_narrow_of_the_whole(before, run, after):
    """`before + run + after`, `run` narrow (what a held narrow body's shared run is): an escape
    may begin or end in it."""
    body = b"".join([*before, *run, *after])
    start = len(b"".join(before))
    end = start + len(b"".join(run))
    if narrow(body[start:end]):
        assert narrow_around(body, start, end) == narrow(body)


def _raw(messages: list[dict[str, Any]], escaped: bool) -> bytes:
    body = {"model": "m", "messages": messages, "tools": TOOLS}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=escaped).encode()


_TEXTS = st.sampled_from(["Go on.", "caf\u00e9", "\U0001f600 done", 'a \\u0041 "quoted" \\'])


@st.composite
def sessions(draw: Any) -> list[bytes]:
    """A long session's turns, each appending messages (ASCII, or not: written raw or as \\u
    escapes), now and then its history written the other way (no turn to go on from)."""
    opening = draw(st.lists(_TEXTS, max_size=2))
    messages = [
        *agent_messages(_LONG_TRANSCRIPT + 2, "narrow"),
        *({"role": "user", "content": t} for t in opening),
    ]
    escaped = draw(st.booleans())
    turns = [_raw(messages, escaped)]
    for _ in range(draw(st.integers(1, 4))):
        texts = draw(st.lists(_TEXTS, min_size=1, max_size=2))
        messages = [*messages, *({"role": "user", "content": t} for t in texts)]
        if draw(st.integers(0, 4)) == 0:
            escaped = not escaped
        turns.append(_raw(messages, escaped))
    return turns


def _held(memo: DecodeMemo) -> list[tuple[int, bool | None]]:
    return [(v.size, v.narrow) for v in memo._probation.values() if type(v) is _FirstSight]


def _bound(raw: bytes, narrow_text: bool) -> int:
    """What the memo bounds a held `raw` by (`DecodeMemo._held_size`)."""
    count = len(orjson.loads(raw)["messages"])
    return body_turn_size(raw, value_bound(raw, 0, len(raw)), count, 0, narrow_text=narrow_text)


def _scanning_memo(turns: list[bytes]) -> DecodeMemo:
    """A memo whose budget holds each turn's body only when scanned narrow: its bound taking
    every string as wide is over it."""
    widest = min(_bound(raw, False) for raw in turns)
    max_bytes = widest
    while DecodeMemo(max_bytes)._items_max >= widest:
        max_bytes -= max_bytes // 64
    memo = DecodeMemo(max_bytes)
    assert max(_bound(raw, True) for raw in turns) <= memo._items_max
    return memo


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_a_turn_going_on_from_a_held_body_is_accounted_as_when_scanned_whole(turns):
    """The same turns through a memo that scans only around the held run and one that scans every
    body whole: the same held sizes and verdicts, the same memo size and the same decode."""
    runs = []
    for scan in (narrow_around, lambda raw, start, end: narrow(raw)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(memo_chain, "narrow_around", scan)
            memo = _scanning_memo(turns)
            run = []
            for raw in turns:
                inbound = _decode(CHAT, raw, memo)
                run.append((_held(memo), memo.size, inbound.request))
            runs.append(run)
    assert runs[0] == runs[1]


def _narrow_session(monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], list[int], DecodeMemo]:
    """Two turns of a long narrow session, the lengths of the bodies `narrow` scans (as they are
    scanned), and a memo that holds each only when scanned narrow."""
    messages = agent_messages(_LONG_TRANSCRIPT + 2, "narrow")
    turns = [_raw(messages, True), _raw([*messages, {"role": "user", "content": "Go on."}], True)]
    scanned: list[int] = []
    whole = memo_chain.narrow
    monkeypatch.setattr(memo_chain, "narrow", lambda raw: scanned.append(len(raw)) or whole(raw))
    return turns, scanned, _scanning_memo(turns)


def test_a_long_narrow_session_scans_only_around_what_it_shares(monkeypatch):
    turns, scanned, memo = _narrow_session(monkeypatch)
    for raw in turns:
        _decode(CHAT, raw, memo)
    assert scanned == [len(turns[0])]  # the first sight only; the next turn read around it
    assert _held(memo) == [(int(_bound(turns[1], True)), True)]


def test_a_held_body_is_bounded_after_its_answer_or_by_the_next_admission(monkeypatch):
    """A first sight whose bound needs the scan waits for it (`DecodeMemo.settle`, the exchange's
    bookkeeping) off its request's way upstream; a `settle` that finds the lock taken (the worker
    thread in the memo) does not wait, and the next request's admission bounds it first: that
    request goes on from the held body all the same."""
    turns, scanned, memo = _narrow_session(monkeypatch)
    body, items = parse_transcript(turns[0], "messages", memo, "s", LIMITS)
    CHAT.decode(body, {}, SEALER, items)
    assert scanned == [] and _held(memo) == []  # on its way upstream: not scanned
    with memo.lock:
        memo.settle()
    assert scanned == [] and _held(memo) == []
    body, items = parse_transcript(turns[1], "messages", memo, "s", LIMITS)
    assert scanned == [len(turns[0])]  # by the admission, before it looked for the held body
    assert None not in items.found[:-1]  # every held item found
    CHAT.decode(body, {}, SEALER, items)
    memo.settle()
    assert _held(memo) == [(int(_bound(turns[1], True)), True)]
