"""The reasoning policy keeps each assistant message's outcome by the message object
(gateway/repair/reasoning_policy.py, gateway/transcript/by_identity.py): a turn that resends the
same objects gets the same result and report as a pass that remembers nothing, whatever was run
before it (other targets, the other mode, a shorter transcript), and the same output objects as
the turn before (what lets the encoders reuse their rendering)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.providers import KINDS, get_adapter
from gateway.repair import reasoning_policy
from gateway.repair.reasoning_policy import apply_reasoning_policy
from gateway.transcript.model import Continuity, Message, Reasoning, Role, Text, ToolCall
from gateway.transcript.target import Target
from tests.property.test_rich_content import rich_requests
from tests.property.transcripts import requests, target_for
from tests.repair.test_holds import sparse_requests

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _targets() -> st.SearchStrategy[Target]:
    return st.builds(target_for, st.sampled_from(KINDS), st.booleans(), st.sampled_from(["drop", "as_text"]))


def _fresh(messages, target, caps, strict):
    reasoning_policy._OUTCOMES.clear()
    return apply_reasoning_policy(messages, target, caps, strict)


def _check(messages, target: Target, other: Target, strict: bool, cut: int) -> None:
    caps = get_adapter(target.kind).capabilities
    cold = _fresh(messages, target, caps, strict)
    # what earlier requests may have left: another target's and the other mode's outcomes, and
    # those of this transcript's first messages
    apply_reasoning_policy(messages, other, get_adapter(other.kind).capabilities, strict)
    apply_reasoning_policy(messages, target, caps, not strict)
    apply_reasoning_policy(messages[:cut], target, caps, strict)
    warm = apply_reasoning_policy(messages, target, caps, strict)
    assert warm == cold
    assert (warm[0] is messages) == (cold[0] is messages)
    again = apply_reasoning_policy(messages, target, caps, strict)
    assert again == cold
    # an outcome that involves a replayable token is judged anew (it depends on the tokens before)
    tokens = any(
        type(b) is Reasoning and b.meta is not None and b.meta.data for m in messages for b in m.blocks
    )
    assert tokens or all(a is b for a, b in zip(again[0], warm[0], strict=True))


@SETTINGS
@given(st.data(), _targets(), _targets(), st.booleans(), st.integers(0, 8))
def test_kept_outcomes_change_nothing_on_agent_transcripts(data, target, other, strict, cut):
    _check(data.draw(requests(target, strict)).messages, target, other, strict, cut)


@SETTINGS
@given(st.data(), _targets(), _targets(), st.booleans(), st.integers(0, 8))
def test_kept_outcomes_change_nothing_on_sparse_transcripts(data, target, other, strict, cut):
    _check(data.draw(sparse_requests(target)).messages, target, other, strict, cut)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(KINDS), _targets(), st.booleans(), st.integers(0, 8))
def test_kept_outcomes_change_nothing_on_rich_transcripts(data, kind, other, strict, cut):
    target = target_for(kind)
    _check(data.draw(rich_requests(target)).messages, target, other, strict, cut)


def test_a_token_seen_before_in_the_same_transcript_is_dropped_on_every_turn():
    """An outcome that depends on the tokens before it is never kept: the message that repeats a
    token is judged anew each time, and a message that is judged first in one transcript and
    second in another gets each transcript's own outcome."""
    target = target_for("anthropic")
    caps = get_adapter("anthropic").capabilities
    meta = Continuity(target.provider, target.continuity_scope, target.kind, target.model, {"signature": "s"})
    first = Message(Role.ASSISTANT, (Reasoning("think", meta), Text("a")))
    second = Message(Role.ASSISTANT, (Reasoning("think", meta), ToolCall("c", "f", "{}")))
    user = Message(Role.USER, (Text("q"),))
    both = (user, first, user, second)
    reasoning_policy._OUTCOMES.clear()
    for _ in range(2):
        out, repairs = apply_reasoning_policy(both, target, caps)
        assert out[3].blocks == (ToolCall("c", "f", "{}"),)
        assert [r.kind for r in repairs] == ["reasoning_dropped"]
    out, repairs = apply_reasoning_policy((user, second), target, caps)
    assert out == (user, second) and not repairs


def test_a_foreign_tool_call_turn_maps_to_the_same_object_on_the_next_turn():
    target = target_for("openai_chat")
    caps = get_adapter("openai_chat").capabilities
    foreign = Continuity("other", "other", "anthropic", "claude-x", {"signature": "s"})
    turn = Message(Role.ASSISTANT, (Reasoning("r", foreign), ToolCall("c", "f", "{}", foreign)))
    first, repairs = _fresh((turn,), target, caps, False)
    second, again = apply_reasoning_policy((turn,), target, caps)
    assert first[0] is second[0] and first[0].blocks == (ToolCall("c", "f", "{}"),)
    assert repairs == again and [r.kind for r in repairs] == ["reasoning_dropped"]
