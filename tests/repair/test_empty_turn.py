from __future__ import annotations

import pytest

from gateway.providers import KINDS, get_adapter
from gateway.repair import prepare
from gateway.repair.empty_turn import drop_empty_turns
from gateway.transcript.model import Continuity, Message, Reasoning, Request, Role, Text
from gateway.transcript.target import Target
from tests.repair.helpers import assistant, call, kinds, result, tool, user

EMPTY = assistant("")
CONVERSATION = (user("hi"), EMPTY, user("still there?"))


@pytest.mark.parametrize("kind", KINDS)
def test_an_empty_turn_is_kept_where_the_family_takes_it_and_dropped_counted_elsewhere(kind):
    caps = get_adapter(kind).capabilities
    target = Target(kind, kind, "m", "http://x")
    prepared = prepare(Request("m", CONVERSATION), target, caps)
    if caps.empty_assistant_turn_ok:
        assert prepared.request.messages == CONVERSATION
        assert prepared.repairs == ()
    else:
        if caps.merge_user_turns:  # the two user messages left side by side are one turn on the wire
            assert prepared.request.messages == (Message(Role.USER, (Text("hi"), Text("still there?"))),)
        else:
            assert prepared.request.messages == (user("hi"), user("still there?"))
        assert kinds(prepared.repairs) == ["empty_turn_dropped"]
    again = prepare(prepared.request, target, caps)  # idempotent
    assert again.request.messages == prepared.request.messages and again.repairs == ()


def test_only_turns_that_say_nothing_count():
    caps = get_adapter("anthropic").capabilities
    messages = (user("hi"), assistant("", call("a")), tool(result("a")), assistant(" \n"), EMPTY, user("go"))
    out, repairs = drop_empty_turns(messages, caps)
    # a call with empty text is not an empty turn; Anthropic also refuses blank text
    assert out == (user("hi"), assistant("", call("a")), tool(result("a")), user("go"))
    assert kinds(repairs) == ["empty_turn_dropped", "empty_turn_dropped"]
    assert drop_empty_turns(out, caps) == (out, [])


def test_a_turn_emptied_by_another_pass_is_not_counted_as_sent_empty():
    foreign = Reasoning("plan", Continuity("other", "other", "anthropic", "x", {"signature": "s"}))
    request = Request("m", (user("hi"), assistant(foreign, ""), user("go")))
    target = Target("gem", "gemini", "g", "http://x")
    prepared = prepare(request, target, get_adapter("gemini").capabilities)
    assert prepared.request.messages == (user("hi"), user("go"))
    assert kinds(prepared.repairs) == ["reasoning_dropped"]
