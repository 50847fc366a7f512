"""For arbitrary canonical transcripts and EVERY provider kind: prepare -> the provider's encoder ->
the provider's strict simulator validator accepts the body; repair is idempotent, never mutates
its input, and lets no continuity out that the target did not issue."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.repair.tool_ids import project_tool_ids
from gateway.simulators.registry import VALIDATORS
from gateway.transcript.model import Reasoning, Request, replace
from gateway.transcript.target import Target
from tests.property.transcripts import (
    KINDS,
    MODELS,
    MORE_MODELS,
    requests,
    state_for,
    target_for,
    valid_requests,
)

SETTINGS = settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rejection_of(request: Request, target: Target) -> str | None:
    body = orjson.loads(get_adapter(target.kind).encode_request(request, target, "sim-key").body)
    rejection = VALIDATORS[target.kind](state_for(target.kind), body, target.model)
    return None if rejection is None else f"{rejection.message}\nbody: {body}"


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_prepared_request_passes_the_provider_validator(kind, data):
    strict = data.draw(st.booleans(), label="strict")
    target = target_for(
        kind,
        data.draw(st.booleans(), label="thinking"),
        data.draw(st.sampled_from(["drop", "as_text"])),
        data.draw(st.sampled_from([MODELS[kind], *MORE_MODELS.get(kind, ())]), label="model"),
    )
    request = data.draw(requests(target, strict), label="request")
    caps = get_adapter(kind).capabilities
    snapshot = repr(request)

    prepared = prepare(request, target, caps, strict=strict)

    assert repr(request) == snapshot, "prepare mutated its input"
    # a transcript of nothing but garbage (orphan results, empty text) has nothing left to send:
    # refusing it is the caller's job (see test_a_transcript_with_nothing_left_comes_back_empty)
    assume(prepared.request.messages)
    assert rejection_of(prepared.request, target) is None
    again = prepare(prepared.request, target, caps, strict=strict)
    assert again.repairs == ()
    assert again.request == prepared.request
    for message in prepared.request.messages:
        assert message.blocks, "an empty message reached the provider"
        for block in message.blocks:
            meta = getattr(block, "meta", None)
            assert meta is None or target.owns(meta), f"continuity of another issuer went out: {block}"
            if strict and type(block) is Reasoning:
                assert not block.text and not block.meta.data, "strict mode replayed reasoning"


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_prepare_is_deterministic(kind, data):
    target = target_for(kind, True, "as_text")
    request = data.draw(requests(target, False))
    caps = get_adapter(kind).capabilities
    assert prepare(request, target, caps) == prepare(request, target, caps)


@pytest.mark.parametrize("kind", KINDS)
@SETTINGS
@given(data=st.data())
def test_a_transcript_already_valid_for_the_target_comes_back_unchanged(kind, data):
    thinking = data.draw(st.booleans(), label="thinking")
    target = target_for(kind, thinking)
    caps = get_adapter(kind).capabilities
    needs_reasoning = caps.reasoning_content_on_tool_turns or (
        caps.signed_thinking_for_tool_loop and thinking
    )
    request = data.draw(valid_requests(target, needs_reasoning, caps.reasoning_replay), label="request")
    messages, _, projected = project_tool_ids(request.messages, target, caps.tool_ids)
    projected_only = replace(request, messages=messages)
    assert rejection_of(projected_only, target) is None, "the generator made an invalid transcript"

    prepared = prepare(request, target, caps)

    # the request carries the decision made for the target; nothing else changes
    if caps.signed_thinking_for_tool_loop:
        assert prepared.decision.reasoning.on is thinking
    assert replace(prepared.request, decision=None) == projected_only
    assert [r.kind for r in prepared.repairs] == ["tool_id_projected"] * projected
