"""Tenants: the credential a request was admitted with is its tenant, whichever header carried it
(`Authorization: Bearer`, `x-api-key`, `x-goog-api-key`, `?key=`). Each test is a leak between
two tenants that once worked over `x-api-key` on the OpenAI dialects (which read only the bearer
token, so every `x-api-key` client was one tenant): another tenant's kept answer continued,
compacted or streamed as NDJSON; its thinking signature restored from a replayed tool-call id;
its conversation moved to another target by naming its X-Session-Id."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.demo import FAMILIES
from gateway.security import Tenants
from gateway.simulators.base import Fault, Reply, ToolCallSpec
from tests.security.conftest import Gateway, serving

TOKEN_A = "tenant-a-token-4Rk8Wq2Zp6Yx"
TOKEN_B = "tenant-b-token-9Lm3Vn7Bc1Hd"
TOKENS = {"TOKEN_A": TOKEN_A, "TOKEN_B": TOKEN_B}
SECRET = "A-private-fact-31415"  # what tenant A told the model
A_KEY = {"x-api-key": TOKEN_A}
A_BEARER = {"Authorization": f"Bearer {TOKEN_A}"}
B_KEY = {"x-api-key": TOKEN_B}
NDJSON = {"Accept": "application/x-ndjson"}


def two_tenants(config: dict[str, Any]) -> None:
    config["auth"] = {"tokens_env": ["TOKEN_A", "TOKEN_B"]}


def sent_upstream(gateway: Gateway, kind: str) -> list[bytes]:
    return [orjson.dumps(r.body) for r in gateway.hub.states[kind].requests]


async def _kept_answer_of_a(gateway: Gateway) -> str:
    gateway.hub.states["anthropic"].push(Reply(text="Noted."))
    status, _, body = await gateway.chat(
        {"model": "claude", "input": f"Remember: {SECRET}"}, A_KEY, "/v1/responses"
    )
    assert status == 200, body
    return orjson.loads(body)["id"]


async def test_another_tenant_cannot_continue_compact_or_stream_a_kept_answer():
    async with serving(two_tenants, env=TOKENS) as gateway:
        kept = await _kept_answer_of_a(gateway)
        before = len(gateway.hub.states["anthropic"].requests)
        attempts = [
            ("/v1/responses", {"model": "claude", "previous_response_id": kept, "input": "Repeat it."}, {}),
            ("/v1/responses/compact", {"model": "claude", "previous_response_id": kept, "input": "x"}, {}),
            (
                "/v1/responses",
                {"model": "claude", "previous_response_id": kept, "input": "Repeat it.", "stream": True},
                NDJSON,
            ),
        ]
        for path, body, extra in attempts:
            status, _, answer = await gateway.chat(body, {**B_KEY, **extra}, path)
            assert status == 400, (path, answer)
            assert orjson.loads(answer)["error"]["code"] == "previous_response_not_found", path
        upstream = sent_upstream(gateway, "anthropic")
        assert len(upstream) == before  # none of B's requests reached a provider
        assert not any(SECRET.encode() in body for body in upstream[1:])

        # the same tenant over another header: the credential is the tenant, not the header
        gateway.hub.states["anthropic"].push(Reply(text=SECRET))
        status, _, answer = await gateway.chat(
            {"model": "claude", "previous_response_id": kept, "input": "Repeat it."},
            A_BEARER,
            "/v1/responses",
        )
        assert status == 200, answer
        assert SECRET.encode() in sent_upstream(gateway, "anthropic")[-1]


def _chat_history(call: dict[str, Any]) -> list[dict[str, Any]]:
    """A stateless chat client's history: the tool call replayed, its reasoning dropped."""
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
    ]


async def test_a_replayed_tool_call_id_restores_only_its_own_tenants_thinking():
    async with serving(two_tenants, env=TOKENS) as gateway:
        anthropic = gateway.hub.states["anthropic"]
        anthropic.push(
            Reply(reasoning="Look it up.", tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})])
        )
        ask = {"model": "claude", "messages": [{"role": "user", "content": "Weather in Paris?"}]}
        status, _, body = await gateway.chat(ask, A_KEY)
        assert status == 200, body
        call = orjson.loads(body)["choices"][0]["message"]["tool_calls"][0]

        history = {"model": "claude", "messages": _chat_history(call)}
        anthropic.push(Reply(text="Sunny."))
        status, _, body = await gateway.chat(history, A_KEY)
        assert status == 200, body
        signature = _thinking_signature(anthropic.requests[-1].body)
        assert signature  # A gets its own thinking back

        anthropic.push(Reply(text="Sunny."))
        await gateway.chat(history, B_KEY)
        assert signature.encode() not in orjson.dumps(anthropic.requests[-1].body)
        assert _thinking_signature(anthropic.requests[-1].body) is None

        anthropic.push(Reply(text="Sunny."))
        status, _, body = await gateway.chat(history, A_BEARER)  # A again, by another header
        assert status == 200, body
        assert _thinking_signature(anthropic.requests[-1].body) == signature


def _thinking_signature(sent: dict[str, Any]) -> str | None:
    blocks = sent["messages"][1]["content"]
    return next((b["signature"] for b in blocks if b["type"] == "thinking"), None)


def _round_robin(config: dict[str, Any]) -> None:
    two_tenants(config)
    targets = [
        {"provider": name, "model": model, **opts}
        for name, _, model, opts in FAMILIES
        if name in ("openai-chat", "mistral")
    ]
    config["models"]["rr"] = {"strategy": "round_robin", "affinity": "session", "targets": targets}


async def test_naming_another_tenants_session_does_not_move_its_conversation():
    kinds = {"openai-chat": "openai_chat", "mistral": "mistral"}
    async with serving(_round_robin, env=TOKENS) as gateway:
        session = {"X-Session-Id": "team-conversation-1"}
        ask = {"model": "rr", "messages": [{"role": "user", "content": "Hello?"}]}
        status, headers, body = await gateway.chat(ask, {**A_KEY, **session})
        assert status == 200, body
        home = headers["X-Gateway-Provider"]
        # B names A's session while A's target is failing: B is served by the other target
        failing = gateway.hub.states[kinds[home]]
        failing.fail_randomly(1.0, Fault(status=503))
        status, headers, body = await gateway.chat(ask, {**B_KEY, **session})
        assert status == 200, body
        assert headers["X-Gateway-Provider"] != home
        failing.fail_randomly(0.0, Fault(status=503))
        for _ in range(3):  # A's conversation stays where it was
            status, headers, body = await gateway.chat(ask, {**A_BEARER, **session})
            assert status == 200, body
            assert headers["X-Gateway-Provider"] == home


def test_a_tenant_is_a_keyed_digest_of_the_credential():
    tenants = Tenants(b"s" * 32)
    assert tenants.of(None) == tenants.of("") == ""
    assert tenants.of(TOKEN_A) == tenants.of(TOKEN_A) != tenants.of(TOKEN_B)
    assert tenants.of(TOKEN_A) != Tenants(b"t" * 32).of(TOKEN_A)  # not a bare hash of the token
    assert TOKEN_A not in tenants.of(TOKEN_A)
