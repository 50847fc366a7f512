from __future__ import annotations

from dataclasses import replace

from gateway.providers.anthropic.adapter import CAPABILITIES as ANTHROPIC
from gateway.providers.openai_chat import CAPABILITIES as OPENAI_CHAT
from gateway.providers.openai_responses.adapter import CAPABILITIES as RESPONSES
from gateway.repair.reasoning_placement import place_reasoning
from gateway.transcript.model import Reasoning, Text
from gateway.transcript.target import Target
from tests.repair.helpers import assistant, call, kinds, user

CLAUDE = Target("c", "anthropic", "m", "http://x")
OPENAI = Target("o", "openai_responses", "m", "http://x")


def own(target: Target, text: str, n: int = 0) -> Reasoning:
    return Reasoning(text, target.continuity({"signature": f"s{n}", "id": f"rs_{n}"}))


def test_anthropic_keeps_reasoning_that_leads_and_is_followed_by_output():
    messages = (user("q"), assistant(own(CLAUDE, "a", 1), own(CLAUDE, "", 2), "answer", call("x")))
    assert place_reasoning(messages, CLAUDE, ANTHROPIC) == (messages, [])


def test_anthropic_message_not_starting_with_reasoning_keeps_none():
    messages = (user("q"), assistant("first", own(CLAUDE, "mid"), call("x")))
    out, repairs = place_reasoning(messages, CLAUDE, ANTHROPIC)
    assert out == (user("q"), assistant("first", call("x")))
    assert kinds(repairs) == ["reasoning_dropped"]


def test_anthropic_trailing_reasoning_is_cut_and_a_reasoning_only_message_vanishes():
    messages = (
        user("q"),
        assistant(own(CLAUDE, "a", 1), "answer", own(CLAUDE, "b", 2)),
        assistant(own(CLAUDE, "c", 3)),
    )
    out, repairs = place_reasoning(messages, CLAUDE, ANTHROPIC)
    assert out == (user("q"), assistant(own(CLAUDE, "a", 1), "answer"))
    assert kinds(repairs) == ["reasoning_dropped", "reasoning_dropped"]


def test_as_text_policy_keeps_the_retired_reasoning_readable():
    target = replace(CLAUDE, reasoning_policy="as_text")
    messages = (user("q"), assistant("first", own(target, "mid"), call("x")))
    out, repairs = place_reasoning(messages, target, ANTHROPIC)
    assert out == (user("q"), assistant("first", Text("mid"), call("x")))
    assert kinds(repairs) == ["reasoning_as_text"]


def test_responses_reasoning_must_be_directly_followed_by_its_output():
    messages = (
        user("q"),
        assistant(own(OPENAI, "a", 1), own(OPENAI, "b", 2), call("x")),
        assistant("text", own(OPENAI, "c", 3)),
    )
    out, repairs = place_reasoning(messages, OPENAI, RESPONSES)
    assert out == (user("q"), assistant(own(OPENAI, "b", 2), call("x")), assistant("text"))
    assert kinds(repairs) == ["reasoning_dropped", "reasoning_dropped"]


def test_responses_reasoning_before_reasoning_retired_as_text_is_followed_by_output():
    target = replace(OPENAI, reasoning_policy="as_text")
    messages = (user("q"), assistant(own(target, "a", 1), own(target, "b", 2)))
    out, repairs = place_reasoning(messages, target, RESPONSES)
    assert out == (user("q"), assistant(own(target, "a", 1), Text("b")))
    assert kinds(repairs) == ["reasoning_as_text"]


def test_targets_without_placement_rules_are_left_alone():
    messages = (user("q"), assistant("x", own(OPENAI, "a")))
    assert place_reasoning(messages, OPENAI, OPENAI_CHAT) == (messages, [])
