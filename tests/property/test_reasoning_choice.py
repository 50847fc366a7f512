"""Every family x every client reasoning choice x every target setting check-config accepts: the
upstream body asks for exactly the decided reasoning, the simulator accepts it, an explicit client
choice is never silently turned around, and the client sees reasoning only when it asked."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.simulators.registry import VALIDATORS
from gateway.transcript.model import Message, Request, Role, Text, replace
from gateway.transcript.reasoning import Decision, client_choice, setting_problem
from gateway.transcript.target import Target
from tests.property.transcripts import KINDS, state_for

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MODELS = {
    "anthropic": ("claude-sonnet-4-5", "claude-opus-4-6", "claude-3-5-haiku-20241022"),
    "openai_responses": ("gpt-5", "gpt-5.1", "gpt-5.2", "o3", "gpt-4.1"),
    "openai_chat": ("gpt-5", "gpt-5.1", "gpt-5.2", "o3", "gpt-4.1"),
    "gemini": ("gemini-3-pro-preview", "gemini-3-flash-preview", "gemini-2.5-pro", "gemini-2.5-flash"),
    "mistral": ("magistral-medium-latest", "mistral-small-latest", "mistral-large-latest"),
    "kimi": ("kimi-k2-thinking", "kimi-k2.5", "kimi-k2-0905-preview"),
    "deepseek": ("deepseek-reasoner", "deepseek-chat", "deepseek-v4-flash"),
}
EFFORTS = (None, "none", "minimal", "low", "medium", "high", "xhigh")
HI = (Message(Role.USER, (Text("hi"),)),)

messages_choices = st.builds(
    lambda thinking, budget, effort: Request(
        "m",
        HI,
        thinking=thinking,
        thinking_budget=budget if thinking else None,
        reasoning_effort=effort,
        thinking_default=False,
    ),
    st.sampled_from([None, False, True]),
    st.sampled_from([None, 1024, 8000]),
    st.sampled_from([None, "low", "high", "xhigh"]),
)
effort_choices = st.builds(lambda effort: Request("m", HI, reasoning_effort=effort), st.sampled_from(EFFORTS))


def rendered(kind: str, body: dict[str, Any]) -> str | None:
    """What the body asks for, read off the wire in the decision's labels (None: nothing)."""
    if kind == "anthropic":
        thinking = body.get("thinking")
        if thinking is None:
            return None
        if thinking["type"] == "adaptive":
            return "adaptive"
        return f"budget={thinking['budget_tokens']}" if thinking["type"] == "enabled" else "off"
    if kind == "openai_responses":
        effort = (body.get("reasoning") or {}).get("effort")
        return None if effort is None else ("off" if effort == "none" else f"effort={effort}")
    if kind == "gemini":
        config = body.get("generationConfig", {}).get("thinkingConfig")
        if config is None:
            return None
        if "thinkingLevel" in config:
            return f"effort={config['thinkingLevel']}"
        return "off" if config["thinkingBudget"] == 0 else f"budget={config['thinkingBudget']}"
    switch = (body.get("thinking") or {}).get("type")
    effort = body.get("reasoning_effort")
    if switch == "disabled" or effort == "none":
        return "off"
    if effort is not None:
        return f"effort={effort}"
    return "on" if switch == "enabled" else None


def check_rendering(kind: str, model: str, decision: Decision, body: dict[str, Any]) -> None:
    label = decision.reasoning.label()
    got = rendered(kind, body)
    if got is None:
        # nothing sent: the model's default, Anthropic's off, or a model without a switch
        entry = get_adapter(kind).capabilities.thinking.model(model)
        switchable = entry.reasons and (entry.can_off or entry.efforts or entry.budgets)
        assert label == "default" or (label == "off" and kind == "anthropic") or not switchable, (label, body)
    else:
        assert got == label, (label, body)
    # what shows reasoning to the client is asked for only when the client sees it
    config = body.get("generationConfig", {}).get("thinkingConfig", {})
    assert config.get("includeThoughts", False) == (decision.shown and "includeThoughts" in config)
    if not decision.shown:
        assert "includeThoughts" not in config and "summary" not in (body.get("reasoning") or {})


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_the_upstream_body_asks_for_exactly_the_decided_reasoning(kind, data):
    model = data.draw(st.sampled_from(MODELS[kind]), label="model")
    budget = data.draw(st.sampled_from([None, 1024, 2048, 16384]), label="thinking_budget")
    effort = data.draw(st.sampled_from([None, "none", "low", "high"]), label="reasoning_effort")
    caps = get_adapter(kind).capabilities
    assume(setting_problem(caps.thinking, model, budget, effort) is None)  # check-config refuses it
    pinned = data.draw(st.booleans(), label="pin_reasoning")
    target = Target(
        "p",
        kind,
        model,
        "http://sim.invalid",
        thinking_budget=budget,
        reasoning_effort=effort,
        pin_reasoning=pinned,
    )
    request = data.draw(messages_choices | effort_choices, label="request")
    stream = data.draw(st.booleans(), label="stream")
    request = replace(request, stream=stream)

    prepared = prepare(request, target, caps)
    decision = prepared.decision
    body = orjson.loads(get_adapter(kind).encode_request(prepared.request, target, "sim-key").body)
    rejection = VALIDATORS[kind](state_for(kind), body, model)
    assert rejection is None, f"{rejection.message}\nbody: {body}"
    check_rendering(kind, model, decision, body)

    asked = client_choice(request)
    if asked is not None:
        # the client is told whenever what was sent turns its own on/off around
        if decision.header() is None and not decision.reasoning.default:
            assert decision.reasoning.on == asked.on, (asked, decision)
        # a client that asked for no reasoning never sees any
        if not asked.on:
            assert not decision.shown
