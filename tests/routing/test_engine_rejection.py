"""Rejection recovery (DESIGN.md 4.5): a continuity or pairing 400 is answered by a strict repair
and one more attempt on the same target, before any failover."""

from __future__ import annotations

import pytest

import gateway.routing.engine as engine_module
from gateway.repair.report import Repair
from gateway.routing.engine import AllTargetsFailed
from gateway.simulators.base import Fault, Reply
from tests.routing.sim_stack import ask, collect, engine_for, group

ANSWER = "Recovered."
REJECTIONS = {
    "anthropic": "messages.1.content.0: Invalid `signature` in `thinking` block",
    "gemini": (
        "Function call is missing a thought_signature in functionCall parts. This is required for tools to"
        " work correctly, and missing thought_signature may lead to degraded model performance. Additional"
        " data, function call `default_api:get_weather` , position 2. Please refer to"
        " https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
    ),
    "openai_chat": (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
        " 'tool_call_id'. The following tool_call_ids did not have response messages: call_x"
    ),
}
NAMES = {"anthropic": "claude", "gemini": "gemini", "openai_chat": "openai-chat"}
CATEGORY = {"anthropic": "continuity", "gemini": "continuity", "openai_chat": "pairing"}


@pytest.fixture
def prepare_calls(monkeypatch) -> list[bool]:
    calls: list[bool] = []
    real = engine_module.prepare

    def spy(request, target, caps, strict=False):
        calls.append(strict)
        return real(request, target, caps, strict=strict)

    monkeypatch.setattr(engine_module, "prepare", spy)
    return calls


def outcomes(attempts) -> list[tuple[str, str]]:
    return [(a.provider, a.outcome) for a in attempts]


@pytest.mark.parametrize("kind", sorted(REJECTIONS))
async def test_a_rejection_is_repaired_strictly_and_retried_on_the_same_target(hub, prepare_calls, kind):
    name = NAMES[kind]
    other = "deepseek"
    hub.states[kind].push(Fault(status=400, message=REJECTIONS[kind]), Reply(text=ANSWER))
    async with engine_for(hub, {"pair": group(name, other)}) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
    assert got.text == ANSWER
    assert outcomes(answer.attempts) == [(name, CATEGORY[kind]), (name, "ok")]
    assert prepare_calls == [False, True]
    assert answer.repairs[-1] == Repair("retried_after_rejection")
    assert answer.repairs.count(Repair("retried_after_rejection")) == 1
    assert len(hub.states["deepseek"].requests) == 0, "no failover before the strict retry"
    assert engine.health.breaker(answer.target).consecutive == 0, "a rejection is no health failure"


async def test_a_second_rejection_goes_to_the_client(hub, prepare_calls):
    hub.states["anthropic"].push(*[Fault(status=400, message=REJECTIONS["anthropic"])] * 2)
    async with engine_for(hub, {"pair": group("claude", "deepseek")}) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("pair"), engine.router.plan("pair"))
        assert engine.health.available(engine.router.groups()["pair"][0])
    assert outcomes(info.value.attempts) == [("claude", "continuity"), ("claude", "continuity")]
    assert info.value.final.status == 400
    assert prepare_calls == [False, True]
    assert len(hub.states["deepseek"].requests) == 0


async def test_a_retryable_failure_of_the_strict_retry_fails_over(hub, prepare_calls):
    hub.states["anthropic"].push(Fault(status=400, message=REJECTIONS["anthropic"]), Fault(status=529))
    hub.states["deepseek"].push(Reply(text=ANSWER))
    async with engine_for(hub, {"pair": group("claude", "deepseek")}) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
    assert got.text == ANSWER
    assert outcomes(answer.attempts) == [
        ("claude", "continuity"),
        ("claude", "overloaded"),
        ("deepseek", "ok"),
    ]
    assert Repair("retried_after_rejection") not in answer.repairs, "the served answer was not retried"
    assert prepare_calls == [False, True, False]


async def test_an_ordinary_400_is_not_retried(hub, prepare_calls):
    hub.states["anthropic"].push(Fault(status=400, message="max_tokens: must be at least 1"))
    async with engine_for(hub, {"pair": group("claude", "deepseek")}) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("pair"), engine.router.plan("pair"))
    assert outcomes(info.value.attempts) == [("claude", "invalid_request")]
    assert prepare_calls == [False]
