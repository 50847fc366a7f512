"""`message_keys` resumes a conversation's keys after the messages its previous turn shared
(gateway/transcript/resume.py): the keys are those computed from the start, whatever was held
(the conversation's first messages, a turn that went on differently, another session's keys)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.continuity import restore
from gateway.continuity.restore import keyed, message_keys
from gateway.providers import KINDS
from gateway.transcript import resume
from gateway.transcript.model import Message, Request, Role, Text, ToolCall, replace
from tests.property.transcripts import requests, target_for


@pytest.fixture(autouse=True)
def _every_length(monkeypatch):
    monkeypatch.setattr(resume, "MIN_MESSAGES", 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), st.integers(0, 12), st.sampled_from(["", "t1"]))
def test_resumed_keys_are_the_keys_from_the_start(data, kind, cut, tenant):
    request = data.draw(requests(target_for(kind), False))
    messages = request.messages
    restore._KEYS_SO_FAR.clear()
    want = message_keys(request, "s1", tenant)
    message_keys(request, "s2", tenant)
    message_keys(request, "s1", "other")
    message_keys(replace(request, messages=messages[:cut] + messages[cut:][::-1]), "s1", tenant)
    message_keys(replace(request, messages=messages[:cut]), "s1", tenant)
    assert message_keys(request, "s1", tenant) == want
    assert message_keys(request, "s1", tenant) == want
    # a key per assistant turn, resumed or not: the exchange takes the answer's position among
    # the conversation's assistant turns from their count (gateway/exchange.py `restore_recorded`)
    for variant in (messages[:cut] + messages[cut:][::-1], messages[:cut], messages):
        assert len(message_keys(replace(request, messages=variant), "s1", tenant)) == sum(
            1 for m in variant if m.role is Role.ASSISTANT
        )
    # the distinct keys the store is asked for, in order, as counted from the start
    assert list(keyed(request, "s1", tenant)[1]) == list(dict.fromkeys(k for k in want if k is not None))


def test_text_turns_after_the_held_ones_count_their_position_on():
    """A text turn's key holds its position among the assistant turns: the new turns' positions
    go on from the held ones'."""
    turns = [Message(Role.USER, (Text("q"),))]
    for n in range(3):
        turns += [Message(Role.ASSISTANT, (Text("same"),)), Message(Role.USER, (Text(f"u{n}"),))]
    restore._KEYS_SO_FAR.clear()
    message_keys(Request("m", tuple(turns[:3])), "s")
    resumed = message_keys(Request("m", tuple(turns)), "s")
    restore._KEYS_SO_FAR.clear()
    assert resumed == message_keys(Request("m", tuple(turns)), "s")
    assert len(set(resumed)) == 3


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["call_a", "call_b", "call_c", None]), max_size=8), st.integers(0, 8))
def test_distinct_keys_resumed_are_those_from_the_start_when_calls_repeat(calls, cut):
    # a call id re-used by a later turn (or text turns) must not be asked for twice
    turns = [Message(Role.USER, (Text("q"),))]
    for n, call in enumerate(calls):
        block = ToolCall(call, "f", "{}") if call else Text(f"t{n % 2}")
        turns += [Message(Role.ASSISTANT, (block,)), Message(Role.USER, (Text(f"u{n}"),))]
    messages = tuple(turns)
    restore._KEYS_SO_FAR.clear()
    want = list(keyed(Request("m", messages), "s")[1])
    restore._KEYS_SO_FAR.clear()
    keyed(Request("m", messages[: 1 + 2 * cut]), "s")
    assert list(keyed(Request("m", messages), "s")[1]) == want
    assert len(want) == len(set(want))
