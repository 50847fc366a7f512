"""Named client keys: model allow-lists (403), requests/tokens per minute and a daily USD budget
(429 with Retry-After), each in the dialect's own envelope; counted per key; shared by replicas
through Redis, failing open when it is down."""

from __future__ import annotations

import orjson
import pytest

from gateway.simulators.base import free_port
from tests.ops.conftest import USER, running_stack
from tests.redis_server import RedisServer, redis_server

__all__ = ["redis_server"]

ENV = {"TEAM_A_TOKEN": "team-a-token-0123456789", "ADMIN_TOKEN": "admin-token-0123456789"}
TEAM_A = {"Authorization": f"Bearer {ENV['TEAM_A_TOKEN']}"}


def with_keys(store=None, auth=False, **limits):
    def adjust(data):
        data["keys"] = {"team-a": {"token_env": "TEAM_A_TOKEN", **limits}}
        if auth:
            data["auth"] = {"tokens_env": ["ADMIN_TOKEN"]}
        if store is not None:
            data["store"] = store

    return adjust


async def test_a_model_the_key_may_not_use_is_a_403_in_each_dialects_envelope():
    async with running_stack(with_keys(models=["openai-chat", "claude"]), env=ENV) as stack:
        status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
        assert status == 200
        status, _, body = await stack.chat({"model": "mistral", "messages": USER}, TEAM_A)
        assert status == 403
        error = orjson.loads(body)["error"]
        assert error["type"] == "permission_error" and error["param"] == "model"
        assert "may not use model 'mistral'" in error["message"]

        messages = {"model": "gemini", "max_tokens": 100, "messages": USER}
        status, _, body = await stack.chat(messages, {"x-api-key": ENV["TEAM_A_TOKEN"]}, path="/v1/messages")
        assert status == 403
        assert orjson.loads(body) == {
            "type": "error",
            "error": {"type": "permission_error", "message": "key 'team-a' may not use model 'gemini'"},
        }
        status, _, body = await stack.chat(
            messages, {"x-api-key": ENV["TEAM_A_TOKEN"]}, path="/v1/messages/count_tokens"
        )
        assert status == 403 and orjson.loads(body)["error"]["type"] == "permission_error"
        claude = {"model": "claude", "messages": USER}
        status, _, _ = await stack.chat(
            claude, {"x-api-key": ENV["TEAM_A_TOKEN"]}, path="/v1/messages/count_tokens"
        )
        assert status == 200
        assert stack.hub.states["mistral"].requests == [] and stack.hub.states["gemini"].requests == []
        status, _, _ = await stack.chat({"model": "mistral", "messages": USER})
        assert status == 401, "with keys configured, a client must present a token"
        sample = stack.metrics.registry.get_sample_value
        assert sample("gateway_key_requests_total", {"key": "team-a", "outcome": "forbidden_model"}) == 2
        assert sample("gateway_key_requests_total", {"key": "team-a", "outcome": "ok"}) == 1


@pytest.mark.parametrize("method", ["embedContent", "batchEmbedContents"])
async def test_embeddings_hold_to_the_keys_model_list_in_googles_envelope(method):
    one = {"content": {"parts": [{"text": "x"}]}}
    body = one if method == "embedContent" else {"requests": [{"model": "models/gemini", **one}]}
    goog = {"x-goog-api-key": ENV["TEAM_A_TOKEN"]}
    async with running_stack(with_keys(models=["claude"]), env=ENV) as stack:
        status, _, raw = await stack.chat(body, goog, path=f"/v1beta/models/gemini:{method}")
        assert status == 403
        error = orjson.loads(raw)["error"]
        assert error["status"] == "PERMISSION_DENIED" and "may not use model 'gemini'" in error["message"]
        assert stack.hub.states["gemini"].requests == []
    async with running_stack(with_keys(models=["gemini"]), env=ENV) as stack:
        status, _, raw = await stack.chat(body, goog, path=f"/v1beta/models/gemini:{method}")
        assert status == 200, raw
        assert len(stack.hub.states["gemini"].requests) == 1


async def test_over_its_requests_per_minute_a_key_gets_429_with_retry_after_and_others_are_not_limited():
    async with running_stack(with_keys(auth=True, requests_per_minute=2), env=ENV) as stack:
        for _ in range(2):
            status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
            assert status == 200
        status, headers, body = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
        assert status == 429
        assert 1 <= int(headers["Retry-After"]) <= 60
        error = orjson.loads(body)["error"]
        assert error["code"] == "limited_requests" and "2 requests per minute" in error["message"]

        responses = {"model": "openai-chat", "input": "hi"}
        status, headers, body = await stack.chat(responses, TEAM_A, path="/v1/responses")
        assert status == 429 and "Retry-After" in headers
        assert orjson.loads(body)["error"]["code"] == "limited_requests"

        admin = {"Authorization": f"Bearer {ENV['ADMIN_TOKEN']}"}
        for _ in range(3):
            status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER}, admin)
            assert status == 200, "an [auth] token is no key: not limited"
        sample = stack.metrics.registry.get_sample_value
        assert sample("gateway_key_requests_total", {"key": "team-a", "outcome": "limited_requests"}) == 2
        assert (
            sample("gateway_store_operations_total", {"backend": "memory", "op": "limit", "outcome": "ok"})
            == 4
        )


async def test_the_request_that_crosses_the_budget_is_served_and_the_next_is_not(caplog):
    caplog.set_level("INFO", logger="gateway.access")
    async with running_stack(
        with_keys(budget_usd_per_day=0.000001, tokens_per_minute=10**6), env=ENV
    ) as stack:
        status, _, _ = await stack.chat({"model": "claude", "messages": USER}, TEAM_A)
        assert status == 200
        status, headers, body = await stack.chat({"model": "claude", "messages": USER}, TEAM_A)
        assert status == 429
        assert 1 <= int(headers["Retry-After"]) <= 86400
        assert orjson.loads(body)["error"]["code"] == "limited_budget"
        status, _, body = await stack.chat(
            {"model": "claude", "max_tokens": 100, "messages": USER}, TEAM_A, path="/v1/messages"
        )
        assert status == 429 and orjson.loads(body)["error"]["type"] == "rate_limit_error"
        sample = stack.metrics.registry.get_sample_value
        spent = sample("gateway_key_cost_usd_total", {"key": "team-a"})
        assert spent and spent > 0.000001
        assert sample("gateway_key_tokens_total", {"key": "team-a"}) > 0
        lines = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.access"]
        assert lines[0]["key"] == "team-a" and lines[0]["cost_usd"] == pytest.approx(spent)
        assert lines[1]["status"] == 429 and lines[1]["cost_usd"] is None


async def test_over_its_tokens_per_minute_a_key_waits_for_the_next_minute():
    async with running_stack(with_keys(tokens_per_minute=5), env=ENV) as stack:
        status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
        assert status == 200
        status, headers, body = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
        assert status == 429 and orjson.loads(body)["error"]["code"] == "limited_tokens"
        assert 1 <= int(headers["Retry-After"]) <= 60


async def test_replicas_share_a_keys_limits_through_redis(redis_server: RedisServer):
    store = {"backend": "redis", "url": redis_server.url}
    adjust = with_keys(store=store, requests_per_minute=3)
    async with running_stack(adjust, env=ENV) as one, running_stack(adjust, env=ENV) as two:
        statuses = []
        for stack in (one, two, one, two):
            status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
            statuses.append(status)
        assert statuses == [200, 200, 200, 429]


async def test_a_redis_outage_fails_open_and_is_counted():
    store = {"backend": "redis", "url": f"redis://127.0.0.1:{free_port()}/0"}
    async with running_stack(with_keys(store=store, requests_per_minute=1), env=ENV) as stack:
        for _ in range(3):
            status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER}, TEAM_A)
            assert status == 200
        errors = stack.metrics.registry.get_sample_value(
            "gateway_store_operations_total", {"backend": "redis", "op": "limit", "outcome": "error"}
        )
        assert errors and errors >= 3
