"""The attempt loop against the strict simulators: which failures move on to the next target,
which end the request, and what the client would see up to and after the commit point."""

from __future__ import annotations

import asyncio

import pytest

from gateway.routing.cooldown import target_key
from gateway.routing.engine import AllTargetsFailed, Failure, failure_class
from gateway.simulators.base import Fault, Reply, free_port
from gateway.transcript.events import ErrorCategory
from tests.routing.sim_stack import FakeTime, ask, collect, engine_for, eventually, group

PAIR = {"pair": group("openai-chat", "claude"), "solo": group("openai-chat")}
ANSWER = "The answer is 42, as every towel-carrying hitchhiker knows."


def outcomes(attempts) -> list[tuple[str, str]]:
    return [(a.provider, a.outcome) for a in attempts]


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_retryable_status_fails_over_at_once(hub, status, stream):
    first, second = hub.states["openai_chat"], hub.states["anthropic"]
    first.push(Fault(status=status))
    second.push(Reply(text=ANSWER))
    fake = FakeTime()
    async with engine_for(hub, PAIR, fake) as engine:
        answer = await engine.open(ask("pair", stream=stream), engine.router.plan("pair"))
        got = await collect(answer)
        breaker = engine.health.breaker(engine.router.groups()["pair"][0])
    assert got.text == ANSWER and got.error is None
    assert answer.target.provider == "claude"
    assert [a.provider for a in answer.attempts] == ["openai-chat", "claude"]
    assert failure_class(answer.attempts[0].error) is Failure.RETRY
    assert (len(first.requests), len(second.requests)) == (1, 1)
    assert fake.sleeps == [], "failing over to a healthy target does not wait"
    assert breaker.consecutive == 1 and not breaker.open


@pytest.mark.parametrize(
    ("status", "category"),
    [(400, "invalid_request"), (413, "too_large"), (422, "invalid_request")],
)
async def test_a_final_status_is_one_attempt_and_no_cooldown(hub, status, category):
    first, second = hub.states["openai_chat"], hub.states["anthropic"]
    first.push(Fault(status=status, error_type="invalid_request_error"))
    async with engine_for(hub, PAIR) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("pair"), engine.router.plan("pair"))
        openai_chat = engine.router.groups()["pair"][0]
        assert engine.health.available(openai_chat)
        assert engine.health.breaker(openai_chat).consecutive == 0
    assert outcomes(info.value.attempts) == [("openai-chat", category)]
    assert info.value.final.status == status
    assert (len(first.requests), len(second.requests)) == (1, 0)


@pytest.mark.parametrize(
    ("fault", "category"),
    [(Fault(status=401), "auth"), (Fault(status=403), "permission")],
    ids=["401", "403"],
)
async def test_auth_errors_are_final_and_take_the_target_out_of_service(hub, fault, category):
    first, second = hub.states["openai_chat"], hub.states["anthropic"]
    first.push(fault)
    async with engine_for(hub, PAIR) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("pair"), engine.router.plan("pair"))
        assert outcomes(info.value.attempts) == [("openai-chat", category)]
        openai_chat = engine.router.groups()["pair"][0]
        assert not engine.health.available(openai_chat)
        assert engine.health.available_in(openai_chat) > 250  # out_of_service_seconds = 300
        # the next request does not knock on the broken target again
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        await collect(answer)
        assert outcomes(answer.attempts) == [("claude", "ok")]
    assert (len(first.requests), len(second.requests)) == (1, 1)


async def test_a_quota_error_fails_over_and_takes_the_target_out_of_service(hub):
    first, second = hub.states["openai_chat"], hub.states["anthropic"]
    first.push(Fault(status=429, error_type="insufficient_quota"))
    async with engine_for(hub, PAIR) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        await collect(answer)
        assert outcomes(answer.attempts) == [("openai-chat", "quota"), ("claude", "ok")]
        openai_chat = engine.router.groups()["pair"][0]
        assert not engine.health.available(openai_chat)
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        await collect(answer)
        assert outcomes(answer.attempts) == [("claude", "ok")]
    assert (len(first.requests), len(second.requests)) == (1, 2)


async def test_a_reset_before_headers_fails_over(hub):
    hub.states["openai_chat"].push(Fault(reset_before_headers=True))
    async with engine_for(hub, PAIR) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
    assert outcomes(answer.attempts) == [("openai-chat", "connection"), ("claude", "ok")]
    assert got.error is None and got.text


async def test_a_refused_connection_fails_over(hub):
    closed = {"openai-chat": {"base_url": f"http://127.0.0.1:{free_port()}/v1"}}
    async with engine_for(hub, PAIR, only=closed) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        await collect(answer)
    assert outcomes(answer.attempts) == [("openai-chat", "connection"), ("claude", "ok")]


@pytest.mark.parametrize(
    "fault",
    [Fault(delay=30.0), Fault(after_events=1, mid_stream="stall", stall_seconds=30.0)],
    ids=["before-headers", "after-headers"],
)
async def test_a_stall_before_first_content_is_abandoned_for_the_next_target(hub, fault):
    first = hub.states["openai_chat"]
    first.push(fault)
    hub.states["anthropic"].push(Reply(text=ANSWER))
    async with engine_for(hub, PAIR) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
    assert outcomes(answer.attempts) == [("openai-chat", "timeout"), ("claude", "ok")]
    assert answer.attempts[0].error.type == "first_token_timeout"
    assert got.text == ANSWER
    await eventually(lambda: first.cancelled_requests == 1)  # the stalled request was closed


async def test_the_last_target_is_not_abandoned_for_a_slow_first_token(hub):
    state = hub.states["openai_chat"]
    # slower than first_token_seconds (0.4), well within idle_seconds (3)
    state.push(Fault(delay=1.0, reply=Reply(text=ANSWER)))
    async with engine_for(hub, PAIR) as engine:
        answer = await engine.open(ask("solo"), engine.router.plan("solo"))
        got = await collect(answer)
    assert outcomes(answer.attempts) == [("openai-chat", "ok")]
    assert got.text == ANSWER


async def test_an_error_event_before_content_fails_over(hub):
    # message_start, then Anthropic's in-stream overloaded_error: nothing was shown yet
    hub.states["anthropic"].push(Fault(after_events=1, mid_stream="error"))
    hub.states["openai_chat"].push(Reply(text=ANSWER))
    async with engine_for(hub, {"pair": group("claude", "openai-chat")}) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
    assert outcomes(answer.attempts) == [("claude", "overloaded"), ("openai-chat", "ok")]
    assert got.text == ANSWER and got.error is None


@pytest.mark.parametrize("mid_stream", ["reset", "error"])
async def test_a_failure_after_content_ends_the_answer_and_is_not_spliced(hub, mid_stream):
    first, second = hub.states["openai_chat"], hub.states["anthropic"]
    first.push(Fault(after_events=4, mid_stream=mid_stream, reply=Reply(text=ANSWER, chunk_size=4)))
    async with engine_for(hub, PAIR) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
        breaker = engine.health.breaker(answer.target)
    assert outcomes(answer.attempts) == [("openai-chat", "ok")]
    assert got.text and ANSWER.startswith(got.text) and got.text != ANSWER
    assert got.error is not None and answer.error is got.error.error
    assert type(got.events[-1]).__name__ == "StreamError", "nothing follows the error"
    assert len(second.requests) == 0, "no other provider's output after the commit point"
    assert breaker.consecutive == 1, "the mid-stream failure counts against the target"


async def test_an_idle_gap_after_content_ends_the_answer_with_a_timeout(hub):
    hub.states["openai_chat"].push(
        Fault(after_events=4, mid_stream="stall", stall_seconds=30.0, reply=Reply(text=ANSWER, chunk_size=4))
    )
    async with engine_for(hub, PAIR, timeouts={"idle_seconds": 0.5}) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
    assert got.error is not None and got.error.error.category is ErrorCategory.TIMEOUT
    await eventually(lambda: hub.states["openai_chat"].cancelled_requests == 1)


async def test_group_timeouts_override_the_provider_ones(hub):
    models = {"pair": group("openai-chat", "claude", timeouts={"first_token_seconds": 5.0})}
    async with engine_for(hub, models) as engine:
        plan = engine.router.plan("pair")
        timeouts = engine.timeouts(plan.targets[0], plan)
    assert (timeouts.first_token, timeouts.idle, timeouts.connect) == (5.0, 3.0, 2.0)


async def test_a_committed_probe_closes_the_circuit(hub):
    fake = FakeTime()
    hub.states["openai_chat"].push(*[Fault(status=500)] * 3)
    async with engine_for(hub, {"solo": group("openai-chat", retry={"max_retries": 0})}, fake) as engine:
        for _ in range(3):
            with pytest.raises(AllTargetsFailed):
                await engine.open(ask("solo"), engine.router.plan("solo"))
        target = engine.router.groups()["solo"][0]
        breaker = engine.health.breaker(target)
        assert breaker.open and not engine.health.available(target)
        fake.advance(5.0)
        assert engine.health.available(target)
        answer = await engine.open(ask("solo"), engine.router.plan("solo"))
        await collect(answer)
        assert not breaker.open and engine.health.available(target)
        assert target_key(target) == ("openai-chat", "gpt-4.1")


async def test_a_cancelled_probe_is_released_and_its_upstream_closed(hub):
    fake = FakeTime()
    state = hub.states["openai_chat"]
    state.push(*[Fault(status=500)] * 3, Fault(delay=60.0))
    async with engine_for(hub, {"solo": group("openai-chat", retry={"max_retries": 0})}, fake) as engine:
        for _ in range(3):
            with pytest.raises(AllTargetsFailed):
                await engine.open(ask("solo"), engine.router.plan("solo"))
        target = engine.router.groups()["solo"][0]
        fake.advance(5.0)
        probe = asyncio.ensure_future(engine.open(ask("solo"), engine.router.plan("solo")))
        await eventually(lambda: len(state.requests) == 4)
        assert engine.health.breaker(target).probing
        probe.cancel()  # the client went away
        with pytest.raises(asyncio.CancelledError):
            await probe
        assert not engine.health.breaker(target).probing, "the next request may probe"
        assert engine.health.available(target)
        await eventually(lambda: state.cancelled_requests == 1)


async def test_the_total_timeout_ends_a_long_answer(hub):
    # content flows, then the upstream goes quiet for less than idle_seconds, but the whole
    # response may take only 1s: the total limit, not the idle one, ends it
    hub.states["openai_chat"].push(
        Fault(after_events=4, mid_stream="stall", stall_seconds=8.0, reply=Reply(text=ANSWER, chunk_size=4))
    )
    async with engine_for(hub, PAIR, timeouts={"total_seconds": 1.0, "idle_seconds": 20.0}) as engine:
        answer = await engine.open(ask("pair"), engine.router.plan("pair"))
        got = await collect(answer)
    assert got.text and got.text != ANSWER
    assert got.error is not None and got.error.error.category is ErrorCategory.TIMEOUT
    await eventually(lambda: hub.states["openai_chat"].cancelled_requests == 1)


async def test_a_huge_error_body_is_classified_by_its_beginning(hub):
    """A 429 whose body is larger than the error-body limit is still a rate limit with its
    Retry-After, not a protocol failure."""
    hub.states["openai_chat"].push(Fault(status=429, message="slow down " * 40_000, retry_after=7))
    async with engine_for(hub, {"solo": group("openai-chat")}, FakeTime()) as engine:
        with pytest.raises(AllTargetsFailed) as info:
            await engine.open(ask("solo"), engine.router.plan("solo"))
    first = info.value.attempts[0].error
    assert (first.category, first.status, first.retry_after) == (ErrorCategory.RATE_LIMIT, 429, 7.0)
