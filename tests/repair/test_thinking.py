from __future__ import annotations

from dataclasses import replace

from gateway.providers.anthropic.adapter import CAPABILITIES as ANTHROPIC
from gateway.providers.openai_responses.adapter import CAPABILITIES as RESPONSES
from gateway.repair.thinking import loop_opener, switch_thinking
from gateway.transcript.model import Reasoning, Request, Text, ToolChoice, ToolChoiceMode, ToolSpec
from gateway.transcript.reasoning import decide
from gateway.transcript.target import Target
from tests.repair.helpers import assistant, call, kinds, result, tool, user

CLAUDE = Target("c", "anthropic", "claude-sonnet-4-5", "http://x", thinking_budget=4096)
SIGNED = Reasoning("plan", CLAUDE.continuity({"signature": "sig"}))
TOOLS = (ToolSpec("f"),)


def switch(messages, effort=None, target=CLAUDE, caps=ANTHROPIC, strict=False, choice=None, max_tokens=None):
    """(messages, thinking on/off, repairs) after the switch, from the request's decision."""
    request = Request(
        "group", messages, tools=TOOLS, tool_choice=choice, max_tokens=max_tokens, reasoning_effort=effort
    )
    return _switch(messages, request, target, caps, strict)


def _switch(messages, request, target, caps=ANTHROPIC, strict=False):
    out, decision, repairs = switch_thinking(
        messages, decide(request, target, caps), request, target, caps, strict
    )
    return out, decision.reasoning.on, repairs


def test_the_loop_opener_reaches_back_over_every_turn_pair_with_results():
    loop = (
        user("q"),
        assistant(SIGNED, call("a")),
        tool(result("a")),
        assistant(call("b")),
        tool(result("b")),
        user("also this"),  # merges into the tool turn on the wire: the loop goes on
    )
    assert loop_opener(loop) == 1
    assert loop_opener(loop[:3]) == 1
    assert loop_opener((*loop[:3], assistant("done"))) is None
    assert loop_opener((user("q"), assistant("hi"), user("again"))) is None


def test_a_loop_opened_with_signed_thinking_keeps_thinking_on():
    messages = (user("q"), assistant(SIGNED, call("a")), tool(result("a")))
    assert switch(messages) == (messages, True, [])


def test_a_loop_opened_without_signed_thinking_turns_thinking_off():
    messages = (user("q"), assistant("let me see", call("a")), tool(result("a")))
    out, thinking, repairs = switch(messages, effort="high")
    assert out is messages and thinking is False
    assert kinds(repairs) == ["thinking_disabled"]


def test_thinking_already_off_or_no_open_loop_changes_nothing():
    open_loop = (user("q"), assistant(call("a")), tool(result("a")))
    assert switch(open_loop, effort="none") == (open_loop, False, [])
    closed = (user("q"), assistant(call("a")), tool(result("a")), assistant("done"), user("thanks"))
    assert switch(closed) == (closed, True, [])


def test_strict_mode_and_a_forced_tool_choice_turn_thinking_off():
    messages = (user("q"),)
    _, thinking, repairs = switch(messages, strict=True)
    assert thinking is False and kinds(repairs) == ["thinking_disabled"]
    forced = switch(messages, choice=ToolChoice(ToolChoiceMode.REQUIRED))
    assert forced[1] is False and kinds(forced[2]) == ["thinking_disabled"]
    assert switch(messages, choice=ToolChoice(ToolChoiceMode.AUTO))[1] is True


def test_a_max_tokens_without_room_for_thinking_turns_it_off_and_the_final_message_follows():
    messages = (user("q"), assistant(SIGNED, "partial"))
    out, thinking, repairs = switch(messages, max_tokens=1024)
    assert thinking is False and out == (user("q"), assistant("partial"))
    assert kinds(repairs) == ["reasoning_dropped", "thinking_disabled"]
    assert switch(messages, max_tokens=1025) == (messages, True, [])


def test_with_thinking_off_the_final_assistant_message_loses_its_thinking():
    messages = (user("q"), assistant(SIGNED, "the answer so far"))
    out, thinking, repairs = switch(messages, effort="none")
    assert out == (user("q"), assistant("the answer so far")) and thinking is False
    assert kinds(repairs) == ["reasoning_dropped"]
    as_text = replace(CLAUDE, reasoning_policy="as_text")
    out, _, repairs = switch(messages, effort="none", target=as_text)
    assert out == (user("q"), assistant(Text("plan"), "the answer so far"))
    assert kinds(repairs) == ["reasoning_as_text"]


def test_targets_without_the_thinking_switch_are_left_alone():
    messages = (user("q"), assistant("x", call("a")), tool(result("a")))
    request = Request("group", messages, tools=TOOLS)
    decision = decide(request, CLAUDE, RESPONSES)
    assert switch_thinking(messages, decision, request, CLAUDE, RESPONSES, True) == (messages, decision, [])


def test_a_structured_output_through_a_forced_tool_turns_thinking_off_with_its_own_kind():
    from gateway.transcript.model import ResponseFormat

    older = replace(CLAUDE, model="claude-opus-4-1")
    fmt = ResponseFormat("json_schema", "W", {"type": "object", "properties": {}})
    messages = (user("q"),)
    request = Request("group", messages, tools=TOOLS, response_format=fmt)
    _, thinking, repairs = _switch(messages, request, older)
    assert thinking is False and kinds(repairs) == ["thinking_off_for_forced_tool"]
    # a model with native JSON outputs keeps thinking
    native = replace(CLAUDE, model="claude-sonnet-4-5")
    assert _switch(messages, request, native)[1] is True
