"""`previous_response_id` chains through the gateway, on every store backend: storage grows with
what was sent (each answer keeps only what its request added), the whole conversation reaches the
provider, a continuation sent the moment an answer ended finds it on a fresh connection, a chain
deeper than the limit is refused in the Responses envelope, and a store that cannot answer makes a
continuation a retryable 503 (never "not found"), while a write that failed during an outage is
written once the store is back."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.simulators.base import Reply, SimulatorHub
from tests.e2e.gateway_stack import config_with, serve
from tests.redis_server import free_port, start_redis


@pytest.fixture
async def hub():
    async with SimulatorHub() as hub:
        hub.states["anthropic"].default_reply = lambda body: Reply(text="Noted.")
        yield hub


async def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """One request on a connection of its own (closed after it: the next one is a new one)."""
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.post(
            url + "/v1/responses", data=orjson.dumps(body), headers={"Content-Type": "application/json"}
        ) as resp:
            raw = await resp.read()
            headers = dict(resp.headers)
    if body.get("stream") and resp.status == 200:
        events = [orjson.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]
        completed = [e for e in events if e["type"] == "response.completed"]
        assert completed, "the stream ended without its terminal event"
        return resp.status, headers, completed[0]["response"]
    return resp.status, headers, orjson.loads(raw)


async def chain(url: str, turns: int, text: str = "turn {n} " + "x" * 1000) -> tuple[list[str], int]:
    """`turns` answers, each continuing the last, each sent on a new connection the moment the
    previous one ended (streamed and whole alternately). The ids, and the bytes sent."""
    ids: list[str] = []
    sent = 0
    for n in range(turns):
        body: dict[str, Any] = {"model": "claude", "input": text.format(n=n), "stream": n % 2 == 1}
        if ids:
            body["previous_response_id"] = ids[-1]
        sent += len(orjson.dumps(body))
        status, _, answer = await post(url, body)
        assert status == 200, (n, answer)
        ids.append(answer["id"])
    return ids, sent


async def test_a_continuation_sent_at_once_on_a_new_connection_always_finds_its_answer(hub, store):
    config = config_with(hub, store=store)
    async with serve(hub, config) as gateway:
        ids, _ = await chain(gateway.url, 60, text="turn {n}")
    assert len(set(ids)) == 60  # 0 of 59 continuations missed their answer
    last = orjson.dumps(hub.states["anthropic"].requests[-1].body).decode()
    assert all(f"turn {n}" in last for n in range(60))  # the whole conversation went upstream


async def test_storage_grows_with_what_was_sent_not_with_its_square(hub, tmp_path):
    path = tmp_path / "continuity.db"
    config = config_with(hub, store={"backend": "sqlite", "path": str(path)})
    async with serve(hub, config) as gateway:
        _, sent = await chain(gateway.url, 80)
    stored = sum(p.stat().st_size for p in tmp_path.iterdir() if p.name.startswith("continuity.db"))
    # every turn keeping its whole conversation would store ~40 times what was sent
    assert stored < 4 * sent + 64 * 1024, (stored, sent)
    last = orjson.dumps(hub.states["anthropic"].requests[-1].body).decode()
    assert all(f"turn {n} " in last for n in range(80))


async def test_a_chain_deeper_than_the_limit_is_refused_in_the_responses_envelope(hub, tmp_path):
    config = config_with(hub, store={"backend": "memory", "max_chain_depth": 3})
    async with serve(hub, config) as gateway:
        ids, _ = await chain(gateway.url, 3, text="turn {n}")
        calls = len(hub.states["anthropic"].requests)
        status, _, body = await post(
            gateway.url, {"model": "claude", "input": "one more", "previous_response_id": ids[-1]}
        )
    assert status == 400
    assert body["error"]["code"] == "previous_response_chain_too_deep"
    assert body["error"]["param"] == "previous_response_id"
    assert "max_chain_depth" in body["error"]["message"]
    assert len(hub.states["anthropic"].requests) == calls  # refused before any provider call


async def test_redis_down_a_continuation_is_a_retryable_503_and_a_failed_write_lands_later(hub):
    redis = start_redis()
    store = {"backend": "redis", "url": redis.url}
    try:
        async with (
            serve(hub, config_with(hub, store=store)) as one,
            serve(hub, config_with(hub, store=store)) as two,
        ):
            _, _, first = await post(one.url, {"model": "claude", "input": "kept before the outage"})
            port = redis.port
            redis.stop()
            # replica two has nothing of it in memory: only the store could answer
            status, headers, body = await post(
                two.url, {"model": "claude", "input": "and?", "previous_response_id": first["id"]}
            )
            assert status == 503, body
            assert body["error"]["code"] == "store_unavailable"
            assert body["error"]["param"] == "previous_response_id"
            assert headers["Retry-After"] == "1"
            # an answer made during the outage (store: true) is kept in replica one meanwhile...
            status, _, during = await post(one.url, {"model": "claude", "input": "made during the outage"})
            assert status == 200
            redis = start_redis(port)  # back, and empty (no persistence)
            # ...and written once Redis answers again: replica two can continue it
            for _ in range(200):
                status, _, body = await post(
                    two.url, {"model": "claude", "input": "and?", "previous_response_id": during["id"]}
                )
                if status == 200:
                    break
                assert status in (400, 503), body
                await asyncio.sleep(0.05)
            assert status == 200, body
            assert (
                one.sample("gateway_store_operations_total", backend="redis", op="retry", outcome="ok") >= 1
            )
            assert (
                one.sample("gateway_store_operations_total", backend="redis", op="retry", outcome="dropped")
                == 0
            )
    finally:
        redis.stop()


async def test_redis_unreachable_from_the_start_is_a_503_not_a_not_found(hub):
    store = {"backend": "redis", "url": f"redis://127.0.0.1:{free_port()}/0"}
    async with serve(hub, config_with(hub, store=store)) as gateway:
        status, _, body = await post(
            gateway.url, {"model": "claude", "input": "and?", "previous_response_id": "resp_elsewhere"}
        )
    assert status == 503 and body["error"]["code"] == "store_unavailable"


async def test_one_tenants_long_chain_never_evicts_another_tenants_kept_answer(hub):
    store = {"backend": "memory", "max_bytes": 4 << 20, "tenant_max_bytes": 64 << 10}
    config = config_with(hub, store=store, auth={"tokens_env": ["TOKEN_A", "TOKEN_B"]})
    async with serve(hub, config, {"TOKEN_A": "token-a", "TOKEN_B": "token-b"}) as gateway:
        url = gateway.url + "/v1/responses"

        async def send(token: str, body: dict[str, Any]) -> tuple[int, Any]:
            async with aiohttp.ClientSession() as http:
                async with http.post(
                    url,
                    data=orjson.dumps(body),
                    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                ) as r:
                    return r.status, await r.json()

        status, b_kept = await send("token-b", {"model": "claude", "input": "B's secret plan"})
        assert status == 200
        previous = None
        for n in range(120):  # ~120 KB of A's records: twice A's share
            body: dict[str, Any] = {"model": "claude", "input": f"A turn {n} " + "a" * 1000}
            if previous:
                body["previous_response_id"] = previous
            status, answer = await send("token-a", body)
            if status != 200:  # A's own oldest answers went first: A's chain ends, clearly
                assert status == 400 and answer["error"]["code"] == "previous_response_not_found", answer
                assert "earlier answer" in answer["error"]["message"]
                previous = None
                continue
            previous = answer["id"]
        status, answer = await send(
            "token-b", {"model": "claude", "input": "and?", "previous_response_id": b_kept["id"]}
        )
    assert status == 200, answer
    assert "B's secret plan" in orjson.dumps(hub.states["anthropic"].requests[-1].body).decode()
