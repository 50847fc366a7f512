"""`message_keys` resumes a conversation's keys after the messages its previous turn shared
(gateway/transcript/resume.py): the keys are those computed from the start, whatever was held
(the conversation's first messages, a turn that went on differently, another session's keys)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.continuity import restore
from gateway.continuity.restore import message_keys
from gateway.providers import KINDS
from gateway.transcript import resume
from gateway.transcript.model import Message, Request, Role, Text, replace
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
