"""Backoff, Retry-After / RetryInfo, cooldown, retry budget and deadline in the attempt loop.
Time is a FakeTime: waits are recorded instead of spent."""

from __future__ import annotations

import pytest

from gateway.routing.engine import AllTargetsFailed
from gateway.simulators.base import Fault, Reply
from gateway.transcript.events import ErrorCategory
from tests.routing.sim_stack import FakeTime, ask, collect, engine_for, group

ANSWER = "Served after all."


def outcomes(attempts) -> list[tuple[str, str]]:
    return [(a.provider, a.outcome) for a in attempts]


@pytest.mark.parametrize(("name", "kind"), [("openai-chat", "openai_chat"), ("claude", "anthropic")])
async def test_retry_after_is_waited_out_before_retrying_the_only_target(hub, name, kind):
    state = hub.states[kind]
    state.push(Fault(status=429, retry_after=3.0), Reply(text=ANSWER))
    fake = FakeTime()
    async with engine_for(hub, {"solo": group(name)}, fake) as engine:
        answer = await engine.open(ask("solo"), engine.router.plan("solo"))
        got = await collect(answer)
    assert got.text == ANSWER
    assert outcomes(answer.attempts) == [(name, "rate_limit"), (name, "ok")]
    assert fake.sleeps == [3.0], "the Retry-After, not the 0.1s backoff step"


async def test_gemini_retry_info_is_honoured(hub):
    state = hub.states["gemini"]
    state.push(Fault(status=429, retry_after=2.5), Reply(text=ANSWER))
    fake = FakeTime()
    async with engine_for(hub, {"solo": group("gemini")}, fake) as engine:
        answer = await engine.open(ask("solo"), engine.router.plan("solo"))
        await collect(answer)
    assert outcomes(answer.attempts) == [("gemini", "rate_limit"), ("gemini", "ok")]
    assert answer.attempts[0].error.retry_after == 2.5
    assert fake.sleeps == [2.5]


async def test_gemini_unavailable_is_retried_with_backoff(hub):
    hub.states["gemini"].push(Fault(status=503), Reply(text=ANSWER))
    fake = FakeTime()
    async with engine_for(hub, {"solo": group("gemini")}, fake) as engine:
        answer = await engine.open(ask("solo"), engine.router.plan("solo"))
        await collect(answer)
    assert outcomes(answer.attempts) == [("gemini", "overloaded"), ("gemini", "ok")]
    assert len(fake.sleeps) == 1 and 0.05 <= fake.sleeps[0] <= 0.1  # first step of 0.1s, jittered


async def test_a_retry_after_beyond_the_backoff_cap_goes_back_to_the_client(hub):
    hub.states["openai_chat"].push(Fault(status=429, retry_after=30.0))
    fake = FakeTime()
    async with engine_for(hub, {"solo": group("openai-chat")}, fake) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("solo"), engine.router.plan("solo"))
        assert fake.sleeps == []
        assert info.value.final.category is ErrorCategory.RATE_LIMIT
        assert info.value.final.retry_after == 30.0
        # the target is blocked for the Retry-After: the next request does not reach it
        with pytest.raises(AllTargetsFailed) as again:
            await engine.open(ask("solo"), engine.router.plan("solo"))
        assert again.value.attempts == []
        assert again.value.final.category is ErrorCategory.RATE_LIMIT, "rate limited: 429"
        assert again.value.final.code == "targets_cooling_down"
        assert again.value.final.retry_after == 30.0
    assert len(hub.states["openai_chat"].requests) == 1


async def test_all_targets_down_retries_with_growing_backoff_then_cools_down(hub):
    fake = FakeTime()
    hub.states["openai_chat"].push(*[Fault(status=500)] * 3)
    hub.states["anthropic"].push(*[Fault(status=500)] * 3)
    models = {"pair": group("openai-chat", "claude", retry={"backoff_base_seconds": 0.5})}
    async with engine_for(hub, models, fake) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("pair"), engine.router.plan("pair"))
        assert outcomes(info.value.attempts) == [("openai-chat", "server"), ("claude", "server")] * 3
        # two backoffs (max_retries = 2), equal jitter over 0.5s then 1s
        assert len(fake.sleeps) == 2
        assert 0.25 <= fake.sleeps[0] <= 0.5 and 0.5 <= fake.sleeps[1] <= 1.0
        # three failures in a row opened both circuits: the next request is answered at once
        targets = engine.router.groups()["pair"]
        assert all(engine.health.breaker(t).open for t in targets)
        with pytest.raises(AllTargetsFailed) as cooling:
            await engine.open(ask("pair"), engine.router.plan("pair"))
        assert cooling.value.attempts == []
        assert cooling.value.final.category is ErrorCategory.OVERLOADED, "not rate limited: 503"
        assert cooling.value.final.retry_after == 5.0
        assert [probe() for model, _, probe in engine.availability() if model == "pair"] == [0.0, 0.0]
    assert len(hub.states["openai_chat"].requests) == len(hub.states["anthropic"].requests) == 3


async def test_cooldown_grows_on_repeat_and_a_probe_closes_the_circuit(hub):
    fake = FakeTime()
    state = hub.states["openai_chat"]
    state.push(*[Fault(status=503)] * 4, Reply(text=ANSWER))
    models = {"solo": group("openai-chat", retry={"max_retries": 0})}
    async with engine_for(hub, models, fake) as engine:
        target = engine.router.groups()["solo"][0]
        for _ in range(3):
            with pytest.raises(AllTargetsFailed):
                await engine.open(ask("solo"), engine.router.plan("solo"))
        assert engine.health.available_in(target) == 5.0
        fake.advance(5.0)
        with pytest.raises(AllTargetsFailed) as probe:  # the half-open probe fails
            await engine.open(ask("solo"), engine.router.plan("solo"))
        assert outcomes(probe.value.attempts) == [("openai-chat", "overloaded")]
        assert engine.health.available_in(target) == 10.0, "the second cooldown is twice as long"
        fake.advance(10.0)
        answer = await engine.open(ask("solo"), engine.router.plan("solo"))
        assert (await collect(answer)).text == ANSWER
        assert engine.health.available(target) and not engine.health.breaker(target).open
    assert len(state.requests) == 5


async def test_a_cooling_target_is_skipped_and_the_next_one_serves(hub):
    fake = FakeTime()
    hub.states["openai_chat"].push(*[Fault(status=500)] * 3)
    models = {"pair": group("openai-chat", "claude"), "solo": group("openai-chat", retry={"max_retries": 0})}
    async with engine_for(hub, models, fake) as engine:
        for _ in range(3):
            with pytest.raises(AllTargetsFailed):
                await engine.open(ask("solo"), engine.router.plan("solo"))
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        await collect(answer)
    assert outcomes(answer.attempts) == [("claude", "ok")]
    assert len(hub.states["openai_chat"].requests) == 3


async def test_the_retry_budget_caps_retries(hub):
    fake = FakeTime()
    hub.states["openai_chat"].push(*[Fault(status=500)] * 4)
    retry = {"budget_ratio": 0.0, "budget_burst": 1.0, "max_retries": 5}
    cooldown = {"cooldown": {"consecutive_failures": 10}}
    async with engine_for(hub, {"solo": group("openai-chat", retry=retry)}, fake, **cooldown) as engine:
        with pytest.raises(AllTargetsFailed) as first:
            await engine.open(ask("solo"), engine.router.plan("solo"))
        with pytest.raises(AllTargetsFailed) as second:
            await engine.open(ask("solo"), engine.router.plan("solo"))
        assert engine.budget(engine.router.plan("solo")).balance == 0.0
    assert len(first.value.attempts) == 2, "one retry, the whole budget"
    assert len(second.value.attempts) == 1, "budget spent: no retry"
    assert len(fake.sleeps) == 1


async def test_no_retry_starts_after_the_deadline(hub):
    fake = FakeTime()
    # Retry-After 1.5s is within the 4s backoff cap but not within the 1s deadline
    hub.states["openai_chat"].push(Fault(status=429, retry_after=1.5))
    models = {"solo": group("openai-chat", retry={"deadline_seconds": 1.0})}
    async with engine_for(hub, models, fake) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("solo"), engine.router.plan("solo"))
    assert fake.sleeps == []
    assert len(info.value.attempts) == 1
    assert info.value.final.retry_after == 1.5


async def test_a_target_dropped_for_quota_is_not_retried_but_the_others_are(hub):
    fake = FakeTime()
    hub.states["anthropic"].push(Fault(status=503), Fault(status=503), Reply(text=ANSWER))
    hub.states["openai_chat"].push(Fault(status=429, error_type="insufficient_quota"))
    async with engine_for(hub, {"pair": group("claude", "openai-chat")}, fake) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        await collect(answer)
    assert outcomes(answer.attempts) == [
        ("claude", "server"),
        ("openai-chat", "quota"),
        ("claude", "server"),
        ("claude", "ok"),
    ]
    assert len(fake.sleeps) == 2
