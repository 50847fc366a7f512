"""The smaller holes: count_tokens accounted for like every request (and a provider's refusal
is the client's 4xx, not an estimate), Messages as strict as the other dialects about types,
a 431 in the path's envelope, and error messages that do not echo a huge client value."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import orjson
import pytest
from aiohttp import web

from tests.security.conftest import USER, loopback_site, serving, split_response

COUNT = "/v1/messages/count_tokens"
MESSAGES = {"model": "claude", "max_tokens": 64, "messages": USER}


async def test_count_tokens_is_counted_and_logged(caplog):
    caplog.set_level("INFO", logger="gateway.access")
    async with serving() as gateway:
        for _ in range(3):
            status, headers, body = await gateway.chat({"model": "claude", "messages": USER}, path=COUNT)
            assert status == 200 and orjson.loads(body)["input_tokens"] > 0, body
        status, _, _ = await gateway.chat({"model": "nope", "messages": USER}, path=COUNT)
        assert status == 404
        assert gateway.requests("anthropic_count_tokens", "ok", "claude", "claude") == 3
        assert gateway.requests("anthropic_count_tokens", "client_error", "unknown", "none") == 1
        assert gateway.requests("anthropic_messages", "ok", "claude", "claude") == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
    assert sum("anthropic_count_tokens" in line for line in lines) == 4, lines


@asynccontextmanager
async def anthropic_refusing_to_count(status: int, kind: str, message: str) -> AsyncIterator[str]:
    """An Anthropic API on loopback whose count_tokens refuses every request with its documented
    error body (the strict simulator accepts whatever the gateway validated already)."""

    async def refuse(request: web.Request) -> web.Response:
        seen.append(await request.json())
        return web.json_response(
            {"type": "error", "error": {"type": kind, "message": message}}, status=status
        )

    seen: list[dict] = []
    app = web.Application()
    app.router.add_post("/v1/messages/count_tokens", refuse)
    async with loopback_site(app) as port:
        yield f"http://127.0.0.1:{port}"
    assert seen, "the provider was never asked"


@pytest.mark.parametrize(
    ("status", "kind", "expected"),
    [(400, "invalid_request_error", 400), (413, "request_too_large", 413), (529, "overloaded_error", 200)],
)
async def test_a_provider_refusing_to_count_is_the_clients_4xx(status, kind, expected):
    """A refusal of the request itself is the client's; the provider being unavailable is not
    (the estimate then)."""
    async with anthropic_refusing_to_count(status, kind, "messages.0: refused by the provider") as url:

        def to_refuser(config: dict) -> None:
            config["providers"]["claude"]["base_url"] = url

        async with serving(to_refuser) as gateway:
            got, headers, answer = await gateway.chat({"model": "claude", "messages": USER}, path=COUNT)
            assert got == expected, answer
            if expected == 200:
                assert headers["X-Gateway-Token-Count"] == "estimate"
                assert orjson.loads(answer)["input_tokens"] > 0
            else:
                error = orjson.loads(answer)
                assert error["type"] == "error" and "refused by the provider" in error["error"]["message"]
                assert headers["X-Gateway-Provider"] == "claude"
                assert gateway.requests("anthropic_count_tokens", "client_error", "claude", "claude") == 1


@pytest.mark.parametrize(("field", "value"), [("stream", "yes"), ("max_tokens", "100"), ("stream", 1)])
async def test_messages_refuses_mistyped_fields_like_the_other_dialects(field, value):
    async with serving() as gateway:
        status, _, body = await gateway.chat({**MESSAGES, field: value}, path="/v1/messages")
        assert status == 400, body
        error = orjson.loads(body)
        assert error["type"] == "error" and field in error["error"]["message"]
        for path, other in (
            ("/v1/chat/completions", {"model": "claude", "messages": USER, field: value}),
            ("/v1/responses", {"model": "claude", "input": "hi", field: value}),
        ):
            if field == "max_tokens":
                other["max_output_tokens" if path == "/v1/responses" else "max_tokens"] = value
            assert (await gateway.chat(other, path=path))[0] == 400
        assert len(gateway.hub.states["anthropic"].requests) == 0


async def test_a_header_too_long_on_messages_answers_in_anthropics_envelope():
    async with serving() as gateway:
        for path, anthropic in (("/v1/messages", True), ("/v1/chat/completions", False)):
            reader, writer = await gateway.connect()
            writer.write(f"POST {path} HTTP/1.1\r\nHost: localhost\r\nX-Long: {'a' * 20000}\r\n\r\n".encode())
            await writer.drain()
            status, _, body = split_response(await asyncio.wait_for(reader.read(65536), 10))
            writer.close()
            assert status == 431
            payload = orjson.loads(body)
            if anthropic:
                assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
            else:
                assert payload["error"]["code"] == "header_too_large"
        assert gateway.requests("anthropic_messages", "client_error", "unknown", "none") == 1
        await gateway.serves_normally()


async def test_a_huge_previous_response_id_is_not_echoed_in_full():
    async with serving() as gateway:
        huge = "resp_" + "x" * 1_000_000
        status, _, body = await gateway.chat(
            {"model": "claude", "input": "hi", "previous_response_id": huge}, path="/v1/responses"
        )
        assert status == 400
        error = orjson.loads(body)["error"]
        assert error["code"] == "previous_response_not_found"
        assert len(body) < 1000 and "xxxx" in error["message"]
        await gateway.serves_normally()
