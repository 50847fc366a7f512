"""`restore` resumes a conversation's walk after the messages its previous turn shared while their
records are this turn's too (gateway/continuity/restore.py `_RESTORED`): the result is the walk's
from the start, whatever was held, and a record that expired, appeared or was rewritten since is
read again."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.continuity import restore as restore_module
from gateway.continuity.codec import encode_turn
from gateway.continuity.restore import message_keys, restore
from gateway.providers import KINDS
from gateway.transcript import resume
from gateway.transcript.model import Continuity, Message, Reasoning, Request, Role, Text, replace
from tests.property.transcripts import requests, target_for

SIG = Continuity("claude", "claude", "anthropic", "sonnet", {"signature": "s1"})


@pytest.fixture(autouse=True)
def _every_length(monkeypatch):
    monkeypatch.setattr(resume, "MIN_MESSAGES", 1)


def _records(draw, request: Request, session: str) -> dict[str, bytes]:
    """Per assistant turn with a key: no record, the turn with a reasoning block the client
    dropped (restored), or another turn (an edited copy: kept)."""
    records = {}
    keys = message_keys(request, session)
    turns = [m for m in request.messages if m.role is Role.ASSISTANT]
    for key, message in zip(keys, turns, strict=True):
        if key is None:
            continue
        kind = draw(st.sampled_from(["none", "restored", "other"]))
        if kind == "restored":
            records[key] = encode_turn((Reasoning("plan", SIG), *message.blocks))
        elif kind == "other":
            records[key] = encode_turn((Text("something else"),))
    return records


def _from_start(request: Request, records: dict[str, bytes], session: str):
    restore_module._RESTORED.clear()
    return restore(request, records, session)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.integers(0, 12))
def test_a_resumed_restore_is_the_restore_from_the_start(data, kind, cut):
    request = data.draw(requests(target_for(kind), False))
    messages = request.messages
    records = _records(data.draw, request, "s1")
    want = _from_start(request, records, "s1")
    restore(request, records, "s2")
    restore(replace(request, messages=messages[:cut] + messages[cut:][::-1]), records, "s1")
    restore(replace(request, messages=messages[:cut]), records, "s1")
    assert restore(request, records, "s1") == want
    # the store's records changed meanwhile (expired, written, rewritten): read again
    changed = _records(data.draw, request, "s1")
    restore(replace(request, messages=messages[:cut]), records, "s1")
    assert restore(request, changed, "s1") == _from_start(request, changed, "s1")


def test_a_longer_turn_resumes_and_a_record_gone_since_is_missed():
    turns = [Message(Role.USER, (Text("q"),))]
    for n in range(6):
        turns += [Message(Role.ASSISTANT, (Text(f"a{n}"),)), Message(Role.USER, (Text(f"u{n}"),))]
    short, long = Request("m", tuple(turns[:7])), Request("m", tuple(turns))
    keys = message_keys(long, "s")
    records = {
        k: encode_turn((Reasoning("plan", SIG), *m.blocks)) for k, m in zip(keys, turns[1::2], strict=True)
    }
    restore_module._RESTORED.clear()
    restore(short, records, "s")
    assert restore_module._RESTORED.find(long.messages, ("s", ""))[0] == len(short.messages)
    restored, repairs = restore(long, records, "s")
    assert len(repairs) == 6 and restored == _from_start(long, records, "s")[0]
    restore(short, records, "s")
    gone = {k: v for k, v in records.items() if k != keys[0]}
    assert restore(long, gone, "s") == _from_start(long, gone, "s")
    assert len(restore(long, gone, "s")[1]) == 5


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.integers(0, 12))
def test_a_turn_after_one_with_nothing_recorded_resumes_as_the_restore_from_the_start(data, kind, cut):
    """A first sight with no record (the exchange's call: its keys given) is held as the walk's
    outcome; the next turn, whatever is recorded by then, restores as from the start."""
    request = data.draw(requests(target_for(kind), False))
    messages = request.messages
    records = _records(data.draw, request, "s1")
    want = _from_start(request, records, "s1")
    before = replace(request, messages=messages[:cut])
    assert restore(before, {}, "s1", "", message_keys(before, "s1")) == (before, [])
    assert restore(request, records, "s1", "", message_keys(request, "s1")) == want
    assert restore(request, records, "s1") == want


def test_a_first_sight_with_nothing_recorded_is_held():
    turns = [Message(Role.USER, (Text("q"),))]
    for n in range(3):
        turns += [Message(Role.ASSISTANT, (Text(f"a{n}"),)), Message(Role.USER, (Text(f"u{n}"),))]
    request = Request("m", tuple(turns))
    restore_module._RESTORED.clear()
    keys = message_keys(request, "s")
    assert restore(request, dict.fromkeys(keys), "s", "", keys) == (request, [])
    done, held = restore_module._RESTORED.find(request.messages, ("s", ""))
    assert done == len(turns) and held == ((None,) * 3, request.messages, (), False)
