"""`prepare` end to end: the seed 002 sequence rendered for every provider kind and judged by its
strict simulator, strict mode, idempotence and the provider id map."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.repair.tool_pairing import synthetic_result
from gateway.simulators import anthropic_rules, gemini, responses_rules
from gateway.simulators.registry import VALIDATORS
from gateway.transcript.model import Message, Reasoning, Request, Role, ToolCall, ToolResult, replace
from tests.property.transcripts import KINDS, TOOLS, Builder, state_for, target_for
from tests.repair.helpers import assistant, call, result, tool, user

CITIES = ("Tokyo", "Lima", "Oslo", "Rome", "Paris")
LONG_TEXT = "The forecast, city by city: " + " ".join(f"line {i}." for i in range(40))


def body_for(request: Request, target) -> dict:
    return orjson.loads(get_adapter(target.kind).encode_request(request, target, "sim-key").body)


def verified_tokens(body: dict, target) -> tuple[int, int]:
    """(continuity tokens the simulator verified, placeholders it accepted)."""
    state = state_for(target.kind)
    if target.kind == "anthropic":
        return anthropic_rules.check(state, body, target.model)[1], 0
    if target.kind == "openai_responses":
        return responses_rules.check(state, body, target.model)[1], 0
    if target.kind == "gemini":
        findings = gemini.check(state, body, target.model)[1]
        return findings.verified, findings.placeholders
    return 0, 0


def seed_002(issuer) -> tuple[Message, ...]:
    """thinking, call C1, result C1, thinking, 5 calls C2..C6 with only C3's result, thinking, long
    text - each assistant message as `issuer` produced it, with its continuity."""
    builder = Builder(issuer, strict=False)
    first = builder.own_turn(True, "", [("get_weather", {"city": "Paris"})], False)
    fan_out = builder.own_turn(True, "", [("get_weather", {"city": c}) for c in CITIES], False)
    answer = builder.own_turn(True, LONG_TEXT, [], True)

    def canonical_ids(message: Message, first_id: int) -> Message:
        calls = iter(range(first_id, first_id + 10))
        return Message(
            Role.ASSISTANT,
            tuple(
                replace(b, id=f"hist_tool_{next(calls)}") if type(b) is ToolCall else b
                for b in message.blocks
            ),
        )

    return (
        user("Weather in six cities?"),
        canonical_ids(first, 1),
        tool(result("hist_tool_1", "sunny")),
        canonical_ids(fan_out, 2),
        tool(result("hist_tool_3", "rain")),
        answer,
    )


def other_kind(kind: str) -> str:
    return KINDS[(KINDS.index(kind) + 1) % len(KINDS)]


# what each signing simulator verifies of the target's own seed-002 tokens: the next turn replays
# the three reasoning blocks (Gemini validates the current turn only, which is new); mid-loop
# replays the two that opened the loop (Gemini: the signed first call of both steps)
OWN_TOKENS = {
    "anthropic": {"next_turn": 3, "mid_loop": 2},
    "openai_responses": {"next_turn": 3, "mid_loop": 2},
    "gemini": {"next_turn": 0, "mid_loop": 2},
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("issuer", ["own", "other"])
@pytest.mark.parametrize("point", ["next_turn", "mid_loop"])
def test_seed_002_sequence_is_valid_for_every_provider(kind, issuer, point):
    target = target_for(kind, thinking=True)
    source = target if issuer == "own" else target_for(other_kind(kind), thinking=True)
    messages = seed_002(source)
    # next turn: the user asks on; mid loop: the request that continues after the partial fan-out
    messages = (*messages, user("Thanks, summarize.")) if point == "next_turn" else messages[:5]
    request = Request("group", messages, tools=TOOLS)

    prepared = prepare(request, target, get_adapter(kind).capabilities)

    body = body_for(prepared.request, target)
    rejection = VALIDATORS[kind](state_for(kind), body, target.model)
    assert rejection is None, rejection.message
    counts = Counter(r.kind for r in prepared.repairs)
    assert counts["synthetic_tool_result"] == 4
    # calls keep their order through repair: projected id -> the client's id
    canonical = dict(zip(_call_ids(prepared.request), _call_ids(request), strict=True))
    results = next(m.blocks for m in prepared.request.messages if m.role is Role.TOOL and len(m.blocks) == 5)
    assert [canonical[r.call_id] for r in results] == [f"hist_tool_{n}" for n in range(2, 7)]
    assert [r.content for r in results if type(r) is ToolResult and not r.is_error] == ["rain"]
    assert results[0] == synthetic_result(results[0].call_id)
    verified, placeholders = verified_tokens(body, target)
    if issuer == "own":
        assert verified == OWN_TOKENS.get(kind, {}).get(point, 0)
        assert "reasoning_dropped" not in counts or not get_adapter(kind).capabilities.reasoning_replay
    else:
        assert verified == 0, "another provider's tokens never reach this one"
        assert placeholders == (2 if kind == "gemini" and point == "mid_loop" else 0)
    again = prepare(prepared.request, target, get_adapter(kind).capabilities)
    assert again.request == prepared.request and again.repairs == ()


@pytest.mark.parametrize("kind", KINDS)
def test_strict_mode_replays_no_token_and_stays_valid(kind):
    target = target_for(kind, thinking=True)
    messages = seed_002(target)[:5]
    caps = get_adapter(kind).capabilities

    prepared = prepare(Request("group", messages, tools=TOOLS), target, caps, strict=True)

    body = body_for(prepared.request, target)
    assert VALIDATORS[kind](state_for(kind), body, target.model) is None
    assert verified_tokens(body, target)[0] == 0
    assert all(
        not b.text and not b.meta.data
        for m in prepared.request.messages
        for b in m.blocks
        if type(b) is Reasoning
    )
    if caps.signed_thinking_for_tool_loop:
        assert prepared.decision.reasoning.on is False
        assert "thinking_disabled" in {r.kind for r in prepared.repairs}
    if caps.thought_signature_key:
        assert verified_tokens(body, target)[1] == 2, "a placeholder on the first call of both steps"
    again = prepare(prepared.request, target, caps, strict=True)
    assert again.request == prepared.request and again.repairs == ()


def test_anthropic_loop_opened_by_another_provider_goes_with_thinking_off():
    target = target_for("anthropic", thinking=True)
    messages = seed_002(target_for("gemini"))[:5]

    prepared = prepare(Request("group", messages, tools=TOOLS), target, get_adapter("anthropic").capabilities)

    assert prepared.decision.reasoning.on is False
    assert Counter(r.kind for r in prepared.repairs)["thinking_disabled"] == 1
    assert "thinking" not in body_for(prepared.request, target)


def test_a_valid_request_comes_back_as_the_same_object_with_no_repairs():
    target = target_for("openai_chat")
    request = Request(
        "group",
        (user("q"), assistant(call("call_1")), tool(result("call_1")), assistant("done"), user("thanks")),
    )
    prepared = prepare(request, target, get_adapter("openai_chat").capabilities)
    # the same transcript, carrying the decision made for the target
    assert prepared.request.messages is request.messages and prepared.repairs == ()
    assert replace(prepared.request, decision=None) == request and prepared.decision.reasoning.default


def _call_ids(request: Request) -> list[str]:
    return [call.id for message in request.messages for call in message.tool_calls()]


def test_projected_ids_are_in_the_targets_format_and_results_follow_their_calls():
    target = target_for("mistral")
    request = Request(
        "group", (user("q"), assistant(call("call_canonical_1")), tool(result("call_canonical_1")))
    )
    prepared = prepare(request, target, get_adapter("mistral").capabilities)
    (projected,) = prepared.request.messages[1].tool_calls()
    assert len(projected.id) == 9 and projected.id != "call_canonical_1"
    assert prepared.request.messages[2].blocks[0].call_id == projected.id


def test_a_transcript_with_nothing_left_comes_back_empty():
    """Nothing but an orphan result and empty text: no provider accepts an empty conversation,
    and repair cannot invent one; the caller refuses such a request as invalid."""
    request = Request("group", (tool(result("ghost")), user("")))
    prepared = prepare(request, target_for("anthropic"), get_adapter("anthropic").capabilities)
    assert prepared.request.messages == ()
    assert [r.kind for r in prepared.repairs] == ["orphan_tool_result_dropped"]
