"""The one reasoning decision: precedence (client, target, dialect default), fitting to what the
model takes, what the client sees, and the header that says when the choice was changed."""

from __future__ import annotations

import pytest

from gateway.providers import KINDS, get_adapter
from gateway.transcript import reasoning
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, BlockStop, Finish
from gateway.transcript.model import Message, Reasoning, Request, ResponseFormat, Role, Text
from gateway.transcript.reasoning import (
    ReasoningChoice,
    ReasoningFilter,
    decide,
    setting_problem,
    visible_blocks,
)
from gateway.transcript.target import OutputMode, Target

HI = (Message(Role.USER, (Text("hi"),)),)


def target(kind: str, model: str, **kw) -> Target:
    return Target("p", kind, model, "http://sim.invalid", **kw)


def decided(kind: str, model: str, request: Request | None = None, **kw):
    request = request or Request("m", HI)
    return decide(request, target(kind, model, **kw), get_adapter(kind).capabilities)


def test_a_request_that_says_nothing_gets_the_model_default_or_the_target_setting():
    assert decided("openai_chat", "gpt-5").reasoning.default
    got = decided("openai_chat", "gpt-5", reasoning_effort="high")
    assert got.reasoning == ReasoningChoice(True, effort="high") and got.shown and got.header() is None


def test_the_messages_dialect_default_is_thinking_off_on_every_family():
    unsaid = Request("m", HI, thinking_default=False)
    assert decided("gemini", "gemini-2.5-flash", unsaid).reasoning == ReasoningChoice(False)
    # a model that cannot stop thinking thinks least, and the client sees none of it
    pro = decided("gemini", "gemini-2.5-pro", unsaid)
    assert pro.reasoning == ReasoningChoice(True, budget=128) and not pro.shown
    # the target's own setting stands in for the client that said nothing
    configured = decided("gemini", "gemini-2.5-flash", unsaid, thinking_budget=4096)
    assert configured.reasoning == ReasoningChoice(True, budget=4096) and configured.shown


def test_an_explicit_client_choice_wins_over_the_target_unless_pinned_and_then_the_header_says_so():
    off = Request("m", HI, thinking=False)
    got = decided("gemini", "gemini-2.5-flash", off, thinking_budget=4096)
    assert got.reasoning == ReasoningChoice(False) and got.header() is None
    budget = Request("m", HI, thinking=True, thinking_budget=1024)
    assert decided("gemini", "gemini-2.5-flash", budget, thinking_budget=4096).reasoning.budget == 1024
    pinned = decided("gemini", "gemini-2.5-flash", off, thinking_budget=4096, pin_reasoning=True)
    assert pinned.reasoning == ReasoningChoice(True, budget=4096)
    assert not pinned.shown  # the client asked for none: it still gets none
    assert pinned.header() == "sent=budget=4096; requested=off; by=target"


@pytest.mark.parametrize(
    ("model", "effort", "sent", "told"),
    [
        ("gpt-5", "none", "effort=minimal", True),  # gpt-5 cannot stop reasoning
        ("gpt-5.1", "none", "off", False),
        ("gpt-5.1", "minimal", "effort=low", True),
        ("gpt-5.2", "xhigh", "effort=xhigh", False),
        ("o3", "high", "effort=high", False),
        ("gpt-4.1", "high", "off", True),  # not a reasoning model
        ("gpt-4.1", "none", "off", False),
    ],
)
def test_openai_efforts_are_fitted_per_model(model, effort, sent, told):
    got = decided("openai_responses", model, Request("m", HI, reasoning_effort=effort))
    assert got.reasoning.label() == sent
    assert (got.header() is not None) is told


@pytest.mark.parametrize(
    ("kind", "model", "effort", "sent"),
    [
        ("gemini", "gemini-3-pro-preview", "medium", "effort=high"),  # 3 Pro: low or high (ties go up)
        ("gemini", "gemini-3-flash-preview", "medium", "effort=medium"),
        ("gemini", "gemini-2.5-flash", "high", "budget=24576"),
        ("anthropic", "claude-sonnet-4-5", "low", "budget=1024"),
        ("anthropic", "claude-3-5-haiku-20241022", "low", "off"),
        ("deepseek", "deepseek-v4-flash", "medium", "effort=high"),
        ("deepseek", "deepseek-chat", "high", "on"),
        ("kimi", "kimi-k2.5", "none", "off"),
        ("kimi", "kimi-k2-thinking", "none", "on"),
        ("mistral", "mistral-small-latest", "low", "effort=high"),
        ("mistral", "magistral-medium-latest", "none", "on"),
        ("mistral", "mistral-large-latest", "high", "off"),
    ],
)
def test_every_family_fits_the_choice_to_its_model(kind, model, effort, sent):
    assert decided(kind, model, Request("m", HI, reasoning_effort=effort)).reasoning.label() == sent


def test_adaptive_thinking_where_the_model_sizes_its_own():
    adaptive = Request("m", HI, thinking=True)
    assert decided("anthropic", "claude-opus-4-6", adaptive).reasoning.label() == "adaptive"
    assert decided("anthropic", "claude-sonnet-4-5", adaptive).reasoning.label() == "budget=4096"


def test_repair_turning_thinking_off_is_said_only_to_a_client_that_asked_for_it():
    asked = decided("anthropic", "claude-sonnet-4-5", Request("m", HI, thinking=True, thinking_budget=2048))
    assert asked.thinking_off("repair").header() == "sent=off; requested=budget=2048; by=repair"
    unsaid = decided("anthropic", "claude-sonnet-4-5", thinking_budget=2048)
    assert unsaid.thinking_off("repair").header() is None


def test_the_output_mode_is_decided_with_the_rest():
    fmt = ResponseFormat("json_schema", "W", {"type": "object", "properties": {}})
    request = Request("m", HI, response_format=fmt)
    assert decided("anthropic", "claude-opus-4-1", request).output is OutputMode.FORCED_TOOL
    assert decided("anthropic", "claude-sonnet-4-5", request).output is OutputMode.SCHEMA
    assert decided("deepseek", "deepseek-chat", request).output is OutputMode.JSON_OBJECT


@pytest.mark.parametrize(
    ("kind", "model", "budget", "effort", "key"),
    [
        ("openai_chat", "gpt-4.1", None, "high", "reasoning_effort"),
        ("openai_responses", "gpt-5", None, "none", "reasoning_effort"),
        ("openai_responses", "gpt-5.1", 4096, None, "thinking_budget"),
        ("gemini", "gemini-3-pro-preview", 2048, None, "thinking_budget"),
        ("gemini", "gemini-3-pro-preview", None, "medium", "reasoning_effort"),
        ("gemini", "gemini-2.5-flash", 30000, None, "thinking_budget"),
        ("kimi", "kimi-k2-0905-preview", None, "high", "reasoning_effort"),
        ("kimi", "kimi-k2.5", None, "high", "reasoning_effort"),
        ("deepseek", "deepseek-reasoner", None, "none", "reasoning_effort"),
        ("mistral", "mistral-large-latest", None, "high", "reasoning_effort"),
    ],
)
def test_a_setting_the_model_cannot_honour_names_its_key(kind, model, budget, effort, key):
    problem = setting_problem(get_adapter(kind).capabilities.thinking, model, budget, effort)
    assert problem is not None and problem[0] == key


@pytest.mark.parametrize(
    ("kind", "model", "budget", "effort"),
    [
        ("anthropic", "claude-sonnet-4-5", 4096, None),
        ("anthropic", "claude-sonnet-4-5", None, "high"),
        ("openai_responses", "gpt-5.1", None, "none"),
        ("gemini", "gemini-2.5-pro", 2048, None),
        ("gemini", "gemini-3-pro-preview", None, "low"),
        ("kimi", "kimi-k2.5", None, "none"),
        ("deepseek", "deepseek-v4-pro", None, "high"),
        ("mistral", "mistral-small-latest", None, "high"),
    ],
)
def test_settings_the_model_takes_pass(kind, model, budget, effort):
    assert setting_problem(get_adapter(kind).capabilities.thinking, model, budget, effort) is None


def test_hidden_reasoning_leaves_the_client_stream_and_answer_but_not_the_record():
    hide = ReasoningFilter()
    events = [
        BlockStart(0, BlockKind.REASONING),
        BlockDelta(0, "hmm"),
        BlockStop(0, None),
        BlockStart(1, BlockKind.TEXT),
        BlockDelta(1, "hi"),
        BlockStop(1, None),
        Finish(stop_reason=None),  # type: ignore[arg-type]
    ]
    assert [e for e in events if hide.passes(e)] == events[3:]
    blocks = [Reasoning("hmm"), Text("hi")]
    assert visible_blocks(blocks, False) == [Text("hi")] and visible_blocks(blocks, True) is blocks


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("effort", [None, "none", "low", "high"])
def test_a_request_asking_nothing_is_decided_once_per_target_as_afresh(kind, effort):
    """Most requests ask nothing of reasoning or output: their decision, kept per target, is the
    one worked out afresh, and the next request on the same target gets it."""
    caps = get_adapter(kind).capabilities
    for model in {m.pattern for m in caps.thinking.models} | {"other-model"}:
        on = target(kind, model, reasoning_effort=effort)
        first, again = decide(Request("m", HI), on, caps), decide(Request("n", HI, stream=True), on, caps)
        assert first == again == reasoning._decide(Request("m", HI), on, caps)
        assert again is first
