from __future__ import annotations

from gateway.providers.anthropic.adapter import CAPABILITIES as ANTHROPIC
from gateway.providers.gemini.adapter import CAPABILITIES as GEMINI
from gateway.providers.mistral import CAPABILITIES as MISTRAL
from gateway.providers.openai_chat import CAPABILITIES as OPENAI_CHAT
from gateway.repair.role_order import (
    AFTER_TOOLS_ASSISTANT_TEXT,
    CLOSING_USER_TEXT,
    OPENING_USER_TEXT,
    fix_role_order,
)
from gateway.transcript.model import Continuity, Reasoning, Text
from tests.repair.helpers import assistant, call, kinds, result, tool, user

SIG = Continuity("gem", "gem", "gemini", "g3", {"thought_signature": "c2ln"})
THINKING = Reasoning("hmm", Continuity("c", "c", "anthropic", "m", {"signature": "s"}))


def test_anthropic_merges_assistant_runs_and_opens_with_a_user_message():
    messages = (assistant("hello"), assistant(THINKING, call("a")), tool(result("a")))
    out, repairs = fix_role_order(messages, ANTHROPIC)
    assert out == (user(OPENING_USER_TEXT), assistant("hello", THINKING, call("a")), tool(result("a")))
    assert kinds(repairs) == ["synthetic_message"]


def test_gemini_merges_only_a_call_turn_into_the_model_turn_before_it():
    text_runs = (user("hi"), assistant("one"), assistant("two"))
    assert fix_role_order(text_runs, GEMINI) == (text_runs, [])
    messages = (user("hi"), assistant("checking"), assistant(call("a")), tool(result("a")))
    out, repairs = fix_role_order(messages, GEMINI)
    assert out == (user("hi"), assistant("checking", call("a")), tool(result("a")))
    assert repairs == []


def test_gemini_call_turn_at_the_start_gets_a_user_turn_before_it_but_a_text_turn_does_not():
    out, repairs = fix_role_order((assistant(call("a")), tool(result("a"))), GEMINI)
    assert out[0] == user(OPENING_USER_TEXT)
    assert kinds(repairs) == ["synthetic_message"]
    greeting = (assistant("How can I help?"), user("hi"))
    assert fix_role_order(greeting, GEMINI)[0] is greeting


def test_a_text_signature_survives_a_merge_only_while_it_still_covers_the_whole_text():
    signed_seal = Text("", SIG)
    kept, repairs = fix_role_order(
        (user("q"), assistant("answer", signed_seal), assistant(call("a"))), GEMINI
    )
    assert kept[1].blocks == (Text("answer"), signed_seal, call("a")) and repairs == []
    voided, repairs = fix_role_order(
        (user("q"), assistant("answer", signed_seal), assistant("more", call("a"))), GEMINI
    )
    assert voided[1].blocks == (Text("answer"), Text(""), Text("more"), call("a"))
    assert kinds(repairs) == ["reasoning_dropped"]


def test_mistral_gets_an_assistant_message_between_tool_results_and_user_and_a_closing_user():
    messages = (user("go"), assistant(call("a")), tool(result("a")), user("and?"), assistant("done"))
    out, repairs = fix_role_order(messages, MISTRAL)
    assert out == (
        user("go"),
        assistant(call("a")),
        tool(result("a")),
        assistant(AFTER_TOOLS_ASSISTANT_TEXT),
        user("and?"),
        assistant("done"),
        user(CLOSING_USER_TEXT),
    )
    assert kinds(repairs) == ["synthetic_message", "synthetic_message"]
    assert fix_role_order(out, MISTRAL) == (out, [])


def test_targets_without_role_needs_get_the_transcript_back_as_is():
    messages = (assistant("hi"), assistant("again"), tool(result("a")), user("x"), assistant("y"))
    assert fix_role_order(messages, OPENAI_CHAT) == (messages, [])
