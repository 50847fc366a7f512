"""Fault injection through the whole stack: the official openai SDK -> gateway -> strict
simulators. Each test asserts what the client sees, how many upstream attempts were made, which
target served, the cooldown state and the metrics."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import aiohttp
import openai
import orjson
import pytest

from gateway.simulators.base import Fault, Reply, SimulatorHub
from tests.ops.conftest import JSON
from tests.routing.sim_stack import Stack, gateway_stack, group

ANSWER = "The answer is 42, as every towel-carrying hitchhiker knows."
USER = [{"role": "user", "content": "What is six times seven?"}]
MODELS = {
    "pair": group("openai-chat", "claude"),
    "solo": group("openai-chat"),
    "gem": group("gemini"),
    "down": group("openai-chat", "claude", retry={"backoff_base_seconds": 0.02}),
}
# the statuses each family's simulator turns into its own error body; all retryable
RETRYABLE = [408, 409, 429, 500, 502, 503, 504, 529]


@pytest.fixture
async def hub() -> AsyncIterator[SimulatorHub]:
    async with SimulatorHub(handler_cancellation=True) as hub:
        yield hub


@pytest.fixture
async def stack(hub) -> AsyncIterator[Stack]:
    async with gateway_stack(hub, MODELS) as stack:
        yield stack


async def stream_text(client: openai.AsyncOpenAI, model: str) -> tuple[str, dict[str, str]]:
    raw = await client.chat.completions.with_raw_response.create(model=model, messages=USER, stream=True)
    text = []
    async for chunk in raw.parse():
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
    return "".join(text), dict(raw.headers)


@pytest.mark.parametrize("status", RETRYABLE)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_a_retryable_status_is_invisible_to_the_client(stack, status, stream):
    first, second = stack.hub.states["openai_chat"], stack.hub.states["anthropic"]
    first.push(Fault(status=status))
    second.push(Reply(text=ANSWER))
    client = stack.client()
    if stream:
        text, headers = await stream_text(client, "pair")
    else:
        raw = await client.chat.completions.with_raw_response.create(model="pair", messages=USER)
        text, headers = raw.parse().choices[0].message.content, dict(raw.headers)
    assert text == ANSWER
    assert headers["x-gateway-provider"] == "claude" and headers["x-gateway-attempts"] == "2"
    assert (len(first.requests), len(second.requests)) == (1, 1)
    failovers = stack.metrics.registry.get_sample_value(
        "gateway_failovers_total",
        {
            "model": "pair",
            "from_provider": "openai-chat",
            "to_provider": "claude",
            "reason": _category(status),
        },
    )
    assert failovers == 1
    assert stack.sample("gateway_upstream_attempts_total", provider="claude", outcome="ok") == 1
    assert (
        stack.sample(
            "gateway_requests_total",
            ingress="chat_completions",
            model="pair",
            provider="claude",
            outcome="ok",
        )
        == 1
    )
    assert stack.sample("gateway_target_available", model="pair", provider="openai-chat") == 1


def _category(status: int) -> str:
    # the openai_chat simulator's error bodies, as the openai_chat provider module classifies them
    return {408: "timeout", 409: "server", 429: "rate_limit", 503: "overloaded", 529: "overloaded"}.get(
        status, "server"
    )


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (Fault(reset_before_headers=True), "connection"),
        (Fault(delay=30.0), "timeout"),
        (Fault(after_events=1, mid_stream="stall", stall_seconds=30.0), "timeout"),
        (Fault(after_events=1, mid_stream="reset"), "connection"),
    ],
    ids=["reset-before-headers", "stall-before-headers", "stall-before-content", "reset-before-content"],
)
async def test_failures_before_content_fail_over_cleanly(stack, fault, reason):
    stack.hub.states["openai_chat"].push(fault)
    stack.hub.states["anthropic"].push(Reply(text=ANSWER))
    text, headers = await stream_text(stack.client(), "pair")
    assert text == ANSWER
    assert headers["x-gateway-provider"] == "claude" and headers["x-gateway-attempts"] == "2"
    assert stack.sample("gateway_upstream_attempts_total", provider="openai-chat", outcome=reason) == 1


async def test_an_error_event_before_content_fails_over(hub):
    async with gateway_stack(hub, {"pair": group("claude", "openai-chat")}) as stack:
        hub.states["anthropic"].push(Fault(after_events=1, mid_stream="error"))  # overloaded_error
        hub.states["openai_chat"].push(Reply(text=ANSWER))
        text, headers = await stream_text(stack.client(), "pair")
        assert stack.sample("gateway_upstream_attempts_total", provider="claude", outcome="overloaded") == 1
    assert text == ANSWER and headers["x-gateway-provider"] == "openai-chat"


@pytest.mark.parametrize("mid_stream", ["reset", "error"])
async def test_a_failure_after_n_chunks_ends_the_stream_with_a_well_formed_error(stack, mid_stream):
    first, second = stack.hub.states["openai_chat"], stack.hub.states["anthropic"]
    first.push(Fault(after_events=5, mid_stream=mid_stream, reply=Reply(text=ANSWER, chunk_size=4)))
    client = stack.client()
    stream = await client.chat.completions.create(model="pair", messages=USER, stream=True)
    text = []
    with pytest.raises(openai.APIError) as info:
        async for chunk in stream:
            for choice in chunk.choices:
                text.append(choice.delta.content or "")
    received = "".join(text)
    assert received and ANSWER.startswith(received) and received != ANSWER
    assert info.value.body["type"] == "upstream_error"
    assert len(second.requests) == 0, "no other provider's output spliced in"
    assert (
        stack.sample(
            "gateway_requests_total",
            ingress="chat_completions",
            model="pair",
            provider="openai-chat",
            outcome="stream_error",
        )
        == 1
    )
    assert stack.engine.health.breaker(stack.engine.router.groups()["pair"][0]).consecutive == 1


async def test_a_final_400_is_returned_after_one_attempt(stack):
    stack.hub.states["openai_chat"].push(Fault(status=400, message="Invalid 'max_tokens': must be positive."))
    with pytest.raises(openai.BadRequestError) as info:
        await stack.client().chat.completions.create(model="pair", messages=USER)
    assert "Invalid 'max_tokens'" in info.value.body["message"]
    assert info.value.response.headers["x-gateway-attempts"] == "1"
    assert len(stack.hub.states["anthropic"].requests) == 0
    assert (
        stack.sample("gateway_upstream_attempts_total", provider="openai-chat", outcome="invalid_request")
        == 1
    )
    assert stack.engine.health.available(stack.engine.router.groups()["pair"][0]), "no cooldown"


async def test_429_with_retry_after_beyond_the_cap_reaches_the_client_and_blocks_the_target(stack):
    state = stack.hub.states["openai_chat"]
    state.push(Fault(status=429, retry_after=30))
    client = stack.client()
    with pytest.raises(openai.RateLimitError) as first:
        await client.chat.completions.create(model="solo", messages=USER)
    assert first.value.response.headers["retry-after"] == "30"
    with pytest.raises(openai.RateLimitError) as second:
        await client.chat.completions.create(model="solo", messages=USER)
    assert second.value.body["code"] == "targets_cooling_down"
    assert second.value.response.headers["retry-after"] == "30"
    assert second.value.response.headers["x-gateway-attempts"] == "0"
    assert len(state.requests) == 1
    assert stack.sample("gateway_target_available", model="solo", provider="openai-chat") == 0


async def test_gemini_retry_info_is_waited_out_then_served(stack):
    stack.hub.states["gemini"].push(Fault(status=429, retry_after=0.3), Reply(text=ANSWER))
    text, headers = await stream_text(stack.client(), "gem")
    assert text == ANSWER and headers["x-gateway-attempts"] == "2"
    assert stack.sample("gateway_upstream_attempts_total", provider="gemini", outcome="rate_limit") == 1


async def test_all_targets_down(stack):
    first, second = stack.hub.states["openai_chat"], stack.hub.states["anthropic"]
    first.push(*[Fault(status=500)] * 3)
    second.push(*[Fault(status=529)] * 3)
    client = stack.client()
    with pytest.raises(openai.APIStatusError) as info:
        await client.chat.completions.create(model="down", messages=USER)
    assert info.value.status_code == 503  # the last failure: Anthropic overloaded
    assert info.value.response.headers["x-gateway-attempts"] == "6", "two targets, three passes"
    assert (len(first.requests), len(second.requests)) == (3, 3)
    # three failures in a row opened both circuits: the next client is answered at once
    with pytest.raises(openai.APIStatusError) as cooling:
        await client.chat.completions.create(model="down", messages=USER)
    assert cooling.value.status_code == 503 and cooling.value.body["code"] == "targets_cooling_down"
    assert cooling.value.response.headers["retry-after"] == "5"
    assert (len(first.requests), len(second.requests)) == (3, 3)
    for provider in ("openai-chat", "claude"):
        assert stack.sample("gateway_target_available", model="down", provider=provider) == 0
        assert stack.sample("gateway_target_available", model="pair", provider=provider) == 0, "shared health"
    assert (
        stack.sample(
            "gateway_failovers_total",
            model="down",
            from_provider="openai-chat",
            to_provider="claude",
            reason="server",
        )
        == 3
    )


# for the 1,000-request counts, which inject no stall: a busy machine's scheduling delays at 16
# requests in flight must not pass for a stalled target (the fast first-token timeout would move
# the request elsewhere and change the counts)
UNHURRIED = {"first_token_seconds": 30.0, "idle_seconds": 30.0}


async def test_failover_hides_a_30_percent_failure_rate_over_1000_requests(hub):
    # the first target fails 30% of its attempts at random; its circuit is set to tolerate that
    # rate (it opens at 60%, or 10 in a row) so it keeps getting every first attempt
    tolerant = {"openai-chat": {"cooldown": {"consecutive_failures": 10, "failure_rate": 0.6}}}
    async with gateway_stack(
        hub, {"pair": group("openai-chat", "claude")}, only=tolerant, timeouts=UNHURRIED
    ) as stack:
        flaky, healthy = hub.states["openai_chat"], hub.states["anthropic"]
        flaky.fail_randomly(0.3, Fault(status=503), seed=2024)
        served, errors = await _fire(stack, "pair", 1000)
        failovers = stack.sample(
            "gateway_failovers_total",
            model="pair",
            from_provider="openai-chat",
            to_provider="claude",
            reason="overloaded",
        )
    assert errors == []
    assert len(flaky.requests) == 1000 and 250 <= flaky.random_faults <= 350
    assert failovers == flaky.random_faults == len(healthy.requests), (
        "each failure absorbed by the second target"
    )
    assert served == {"openai-chat": 1000 - flaky.random_faults, "claude": flaky.random_faults}


@pytest.mark.parametrize(
    ("strategy", "weights", "expected", "tolerance"),
    [
        ("round_robin", (1.0, 1.0), {"openai-chat": 500, "claude": 500}, 1),
        # weighted: +-50 of 1,000 is over 3 standard deviations of a 250/750 split
        ("weighted", (1.0, 3.0), {"openai-chat": 250, "claude": 750}, 50),
    ],
)
async def test_distribution_over_1000_requests(hub, strategy, weights, expected, tolerance):
    models = {"spread": group("openai-chat", "claude", strategy=strategy)}
    for target, weight in zip(models["spread"]["targets"], weights, strict=True):
        target["weight"] = weight
    async with gateway_stack(hub, models, timeouts=UNHURRIED) as stack:
        stack.engine.router._rng.seed(20261121)  # a statistical check must not flake: fixed draws
        served, errors = await _fire(stack, "spread", 1000)
    assert errors == []
    for provider, count in expected.items():
        assert abs(served[provider] - count) <= tolerance, served
    assert served["openai-chat"] == len(hub.states["openai_chat"].requests)


async def _fire(stack: Stack, model: str, n: int, concurrency: int = 16) -> tuple[Counter[str], list[str]]:
    """n chat requests (alternately streamed and not) over plain HTTP: which provider served each,
    and every answer that was not the complete scripted text."""
    for state in stack.hub.states.values():
        state.default_reply = lambda body: Reply(text=ANSWER)
    served: Counter[str] = Counter()
    errors: list[str] = []
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> None:
            body = {"model": model, "messages": USER, "stream": i % 2 == 0}
            async with (
                gate,
                session.post(
                    f"{stack.url}/v1/chat/completions", data=orjson.dumps(body), headers=JSON
                ) as resp,
            ):
                payload = await resp.read()
                if resp.status != 200 or _text(payload, body["stream"]) != ANSWER:
                    errors.append(f"{resp.status}: {payload[:300]!r}")
                served[resp.headers.get("X-Gateway-Provider", "?")] += 1

        await asyncio.gather(*(one(i) for i in range(n)))
    return served, errors


def _text(payload: bytes, streamed: bool) -> str | None:
    if not streamed:
        return orjson.loads(payload)["choices"][0]["message"]["content"]
    frames = [f.removeprefix(b"data: ") for f in payload.split(b"\n\n") if f.strip()]
    if frames[-1] != b"[DONE]":
        return None  # ended with an error frame, or cut short
    chunks = [orjson.loads(f) for f in frames[:-1]]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
