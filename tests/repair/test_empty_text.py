from __future__ import annotations

from gateway.providers.anthropic.adapter import CAPABILITIES as ANTHROPIC
from gateway.providers.gemini.adapter import CAPABILITIES as GEMINI
from gateway.repair.empty_text import drop_empty_text
from gateway.transcript.model import Continuity, Text
from tests.repair.helpers import assistant, call, user

SEAL = Text("", Continuity("gem", "gem", "gemini", "g3", {"thought_signature": "c2ln"}))


def test_empty_text_and_the_messages_it_empties_are_removed_but_a_signed_seal_stays():
    messages = (user(""), user("hi", ""), assistant("", call("a")), assistant("answer", SEAL), assistant(" "))
    out = drop_empty_text(messages, GEMINI)
    assert out == (user("hi"), assistant(call("a")), assistant("answer", SEAL), assistant(" "))


def test_anthropic_also_drops_blank_text_and_trailing_whitespace_of_the_final_assistant_text():
    messages = (user("  "), user("hi"), assistant("partial answer \n"))
    assert drop_empty_text(messages, ANTHROPIC) == (user("hi"), assistant("partial answer"))
    blank_final = (user("hi"), assistant("x"), assistant(" \n"))
    assert drop_empty_text(blank_final, ANTHROPIC) == (user("hi"), assistant("x"))
    ends_in_call = (user("hi "), assistant("look: ", call("a")))
    assert drop_empty_text(ends_in_call, ANTHROPIC) is ends_in_call


def test_nothing_to_drop_returns_the_same_object():
    messages = (user("hi"), assistant("there"))
    assert drop_empty_text(messages, ANTHROPIC) is messages
