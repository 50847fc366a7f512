"""The inspector's API over loopback HTTP: what it shows, to whom, and that looking changes
nothing. Bounds of the ring itself are in tests/inspector/test_capture.py."""

from __future__ import annotations

import asyncio
import base64
import gc
import types
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from gateway.simulators.base import Fault, Reply, SimulatorHub
from tests.inspector.loop import THINKING, inspector_gateway, run_loop, script

TOKENS = {"INSPECTOR_TOKEN_A": "tenant-a-secret-token", "INSPECTOR_TOKEN_B": "tenant-b-secret-token"}
A, B = (f"Bearer {t}" for t in TOKENS.values())
USER = [{"role": "user", "content": "Hello"}]


@pytest.fixture
async def hub() -> AsyncIterator[SimulatorHub]:
    async with SimulatorHub(handler_cancellation=True) as hub:
        yield hub


async def get(url: str, path: str, auth: str | None = None, **headers: str) -> tuple[int, object, object]:
    if auth:
        headers["Authorization"] = auth
    async with aiohttp.ClientSession() as s, s.get(url + path, headers=headers) as r:
        return (
            r.status,
            orjson.loads(await r.read()) if r.content_type == "application/json" else None,
            r.headers,
        )


async def post(url: str, path: str, body: object, auth: str | None = None) -> tuple[int, object, object]:
    headers = {"Authorization": auth} if auth else {}
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body, headers=headers) as r:
        return r.status, orjson.loads(await r.read()), r.headers


async def chat(url: str, model: str = "claude", auth: str | None = None) -> str:
    status, _, headers = await post(url, "/v1/chat/completions", {"model": model, "messages": USER}, auth)
    assert status == 200
    return headers["X-Gateway-Request-Id"]


def reachable_text(roots: list[object]) -> list[str]:
    """Every string (and bytes, decoded) reachable from `roots`: what the captures hold."""
    found: list[str] = []
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            found.append(obj)
        elif isinstance(obj, (bytes, bytearray)):
            found.append(bytes(obj).decode("utf-8", "replace"))
        else:
            todo.extend(gc.get_referents(obj))
    assert len(seen) < 1_000_000, "the walk left the captures"
    return found


async def test_every_answer_carries_its_request_id_and_errors_are_kept_too(hub):
    async with inspector_gateway(hub) as gw:
        ok = await chat(gw.url)
        status, body, headers = await post(gw.url, "/v1/chat/completions", {"model": "claude", "messages": 3})
        assert status == 400
        refused = headers["X-Gateway-Request-Id"]
        status, _, headers = await get(gw.url, "/v1/nowhere")
        assert status == 404 and len(headers["X-Gateway-Request-Id"]) == 32
        status, listed, _ = await get(gw.url, "/inspector/api/requests")
        assert status == 200
        assert [s["id"] for s in listed] == [refused, ok]
        assert [s["outcome"] for s in listed] == ["client_error", "ok"]
        status, shown, headers = await get(gw.url, f"/inspector/api/requests/{refused}")
        assert status == 200 and headers["X-Gateway-Request-Id"] == refused
        assert shown["status"] == 400 and "messages" in shown["response"]["error"]
        assert shown["client_request"]["body"] == {"model": "claude", "messages": 3}
        status, shown, _ = await get(gw.url, f"/inspector/api/requests/{ok}")
        assert shown["attempts"][0]["upstream_request"] == hub.states["anthropic"].requests[0].body


async def test_filters_and_limit(hub):
    async with inspector_gateway(hub) as gw:
        ids = [await chat(gw.url, m) for m in ("claude", "gemini", "claude")]
        status, listed, _ = await get(gw.url, "/inspector/api/requests?model=claude")
        assert [s["id"] for s in listed] == [ids[2], ids[0]]
        status, listed, _ = await get(gw.url, "/inspector/api/requests?provider=gemini&outcome=ok")
        assert [s["id"] for s in listed] == [ids[1]]
        status, listed, _ = await get(gw.url, "/inspector/api/requests?limit=1")
        assert [s["id"] for s in listed] == [ids[2]]
        for bad in ("limit=x", "limit=0", "limit=100000"):
            status, body, _ = await get(gw.url, f"/inspector/api/requests?{bad}")
            assert status == 400 and body["error"]["param"] == "limit"


async def test_the_byte_cap_holds_and_the_oldest_go_first(hub):
    async with inspector_gateway(hub, max_bytes=40_000) as gw:
        ids = [await chat(gw.url) for _ in range(30)]
        ring = gw.state.inspector.ring
        assert 0 < ring.bytes <= 40_000
        assert ring.evicted == 30 - len(ring)
        status, listed, _ = await get(gw.url, "/inspector/api/requests?limit=1000")
        assert [s["id"] for s in listed] == ids[::-1][: len(ring)]  # the newest, in order
        status, _, _ = await get(gw.url, f"/inspector/api/requests/{ids[0]}")
        assert status == 404  # evicted


async def test_secrets_are_never_captured():
    provider_key = "sim-provider-key-9876543210"
    async with SimulatorHub(api_key=provider_key) as hub, inspector_gateway(hub, tokens=TOKENS) as gw:
        await run_loop(gw.url, {"Authorization": A})
        await post(gw.url, "/v1/chat/completions", {"model": "claude", "messages": 3}, A)
        async with (
            aiohttp.ClientSession() as s,
            s.post(
                gw.url + "/v1/messages",
                json={"model": "claude", "max_tokens": 10, "messages": USER},
                headers={"x-api-key": TOKENS["INSPECTOR_TOKEN_A"], "anthropic-version": "2023-06-01"},
            ) as r,
        ):
            assert r.status == 200
        status, listed, _ = await get(gw.url, "/inspector/api/requests", A)
        assert len(listed) == 5
        shown = [await get(gw.url, f"/inspector/api/requests/{s['id']}", A) for s in listed]
        previews = [
            await post(gw.url, f"/inspector/api/requests/{s['id']}/preview", {"model": "gemini"}, A)
            for s in listed[:3]
        ]
        assert shown[0][1]["client_request"]["headers"]["anthropic-version"] == "2023-06-01"
        captured = reachable_text(gw.state.inspector.ring.newest(lambda c: True, 100))
    assert any("weather in Paris and Lyon" in t for t in captured)  # the walk does reach the captures
    seen = orjson.dumps([listed, [s[1] for s in shown], [p[1] for p in previews]])
    for secret in (provider_key, *TOKENS.values()):
        assert secret.encode() not in seen
        assert not [t for t in captured if secret in t]


async def test_a_provider_key_a_client_pasted_is_redacted_when_shown():
    provider_key = "sim-provider-key-0123456789"
    async with SimulatorHub(api_key=provider_key) as hub, inspector_gateway(hub) as gw:
        pasted = [{"role": "user", "content": f"my key is {provider_key}"}]
        status, _, headers = await post(
            gw.url, "/v1/chat/completions", {"model": "claude", "messages": pasted}
        )
        assert status == 200
        request_id = headers["X-Gateway-Request-Id"]
        status, shown, _ = await get(gw.url, f"/inspector/api/requests/{request_id}")
        assert status == 200 and shown["client_request"]["body"]["messages"][0]["content"].startswith(
            "my key is"
        )
        assert provider_key not in orjson.dumps(shown).decode()


async def test_a_token_sees_only_its_own_requests(hub):
    async with inspector_gateway(hub, tokens=TOKENS) as gw:
        status, _, headers = await get(gw.url, "/inspector/api/requests")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        status, _, _ = await get(gw.url, "/inspector")
        assert status == 401
        basic = "Basic " + base64.b64encode(b"me:" + TOKENS["INSPECTOR_TOKEN_B"].encode()).decode()
        async with (
            aiohttp.ClientSession() as s,
            s.get(gw.url + "/inspector/api/events", headers={"Authorization": B}) as feed,
        ):
            assert await feed.content.readline() == b": inspector feed\n"
            mine = await chat(gw.url, auth=A)
            theirs = await chat(gw.url, auth=B)
            line = b""
            while not line.startswith(b"data: "):
                line = await asyncio.wait_for(feed.content.readline(), 5)
            assert orjson.loads(line[6:])["id"] == theirs  # B's feed: B's request only
        for auth, own, other in ((A, mine, theirs), (basic, theirs, mine)):
            status, listed, _ = await get(gw.url, "/inspector/api/requests", auth)
            assert [s["id"] for s in listed] == [own]
            status, _, _ = await get(gw.url, f"/inspector/api/requests/{other}", auth)
            assert status == 404
            status, _, _ = await post(
                gw.url, f"/inspector/api/requests/{other}/preview", {"model": "claude"}, auth
            )
            assert status == 404
            status, _, _ = await post(
                gw.url, f"/inspector/api/requests/{own}/preview", {"model": "claude"}, auth
            )
            assert status == 200
        status, _, headers = await get(gw.url, "/inspector", basic)
        assert status == 200 and "script-src 'sha256-" in headers["Content-Security-Policy"]


async def test_without_auth_only_loopback_clients_see_it(hub):
    async with inspector_gateway(hub) as gw:
        for path in ("/inspector", "/inspector/api/requests"):
            status, _, _ = await get(gw.url, path, **{"X-Forwarded-For": "203.0.113.9"})
            assert status == 403


async def test_the_preview_is_what_the_target_then_receives_and_changes_nothing(hub):
    script(hub)
    async with inspector_gateway(hub) as gw:
        loop = await run_loop(gw.url)
        store_writes, recorded = [], []
        store, recorder = gw.state.store, gw.state.recorder
        original_put, original_record, original_keep = store.put, recorder.record, recorder.put
        store.put = lambda *a: store_writes.append(a) or original_put(*a)
        recorder.record = lambda *a: recorded.append(a) or original_record(*a)
        recorder.put = lambda *a: recorded.append(a) or original_keep(*a)
        calls = {kind: len(state.requests) for kind, state in hub.states.items()}
        status, shown, headers = await post(
            gw.url, f"/inspector/api/requests/{loop.ids[2]}/preview", {"model": "claude"}
        )
        assert status == 200 and headers["X-Gateway-Request-Id"] == loop.ids[2]
        assert {kind: len(state.requests) for kind, state in hub.states.items()} == calls  # no provider call
        assert store_writes == [] and recorded == []  # no store write
        assert shown["target"] == {"provider": "claude", "model": "claude-sonnet-4-5", "kind": "anthropic"}
        rows = shown["transcript"]["provider"]
        assert any(r["kind"] == "reasoning" and r["text"] == THINKING["claude"] for r in rows)
        assert not any(r["text"] == THINKING["gemini"] for r in rows)
        # the same client request, now sent to that target: it receives exactly the preview
        hub.states["anthropic"].push(Reply(text="done"))
        store.put, recorder.record, recorder.put = original_put, original_record, original_keep
        async with (
            aiohttp.ClientSession() as s,
            s.post(
                gw.url + "/v1/messages",
                json={**orjson.loads(gw.state.inspector.ring.get(loop.ids[2]).raw), "model": "claude"},
            ) as r,
        ):
            assert r.status == 200
        assert hub.states["anthropic"].requests[-1].body == shown["upstream_request"]
        for bad in ({"model": "nope"}, {"model": ""}, {}):
            status, body, headers = await post(gw.url, f"/inspector/api/requests/{loop.ids[2]}/preview", bad)
            assert status in (400, 404) and headers["X-Gateway-Request-Id"] == loop.ids[2], body


async def test_disabled_it_captures_nothing_and_serves_nothing(hub):
    async with inspector_gateway(hub, enabled=False) as gw:
        await chat(gw.url)
        assert len(gw.state.inspector.ring) == 0
        for path in ("/inspector", "/inspector/api/requests"):
            status, _, _ = await get(gw.url, path)
            assert status == 404


async def test_a_failover_shows_both_attempts_and_what_each_was_sent(hub):
    hub.states["anthropic"].push(Fault(status=529))
    async with inspector_gateway(hub) as gw:
        request_id = await chat(gw.url, "fo.claude.gemini")
        status, shown, _ = await get(gw.url, f"/inspector/api/requests/{request_id}")
    assert status == 200 and shown["provider"] == "gemini"
    first, second = shown["attempts"]
    assert (first["provider"], first["status"], second["provider"], second["status"]) == (
        "claude",
        529,
        "gemini",
        200,
    )
    assert first["error"]["message"] and first["elapsed_ms"] is not None
    assert first["upstream_request"] == hub.states["anthropic"].requests[0].body
    assert second["upstream_request"] == hub.states["gemini"].requests[0].body
    assert second["started_ms"] >= first["started_ms"]
    assert shown["transcript"]["provider_name"] == "gemini"
