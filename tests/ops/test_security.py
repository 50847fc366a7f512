"""Security defaults: bind refusal, client authentication, who may read /metrics, what reaches an
upstream and what reaches a client (header allow-lists both ways), the body size limit
(compressed bodies included), the JSON nesting limit, and the SSE line limit on upstream streams."""

from __future__ import annotations

import asyncio
import gzip
from unittest import mock

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.config import ConfigError, config_from_dict
from gateway.demo import FAMILIES
from gateway.headers import UPSTREAM_REQUEST_HEADERS
from gateway.ingress.errors import ClientError
from gateway.providers.base import HttpRequest
from gateway.security import (
    CLIENT_RESPONSE_HEADERS,
    GATEWAY_HEADER_PREFIX,
    SERVER_HEADER,
    BearerTokens,
    check_access,
    is_loopback_address,
    restrict_response_headers,
)
from gateway.simulators.base import Reply, free_port
from gateway.sse import DEFAULT_MAX_LINE
from gateway.upstream import Timeouts, Upstream, client_session
from tests.ops.conftest import USER, running_stack

TOKEN = "ops-client-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def with_auth(config: dict) -> None:
    config["auth"] = {"tokens_env": ["OPS_TOKEN"]}


# -- binding and authentication -------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_a_non_loopback_bind_is_refused_without_auth_tokens(host):
    data = {
        "server": {"host": host},
        "providers": {"p": {"kind": "anthropic", "base_url": "https://a.example", "api_key_env": "K"}},
    }
    with pytest.raises(ConfigError, match=f"server.host: refusing to bind {host} without"):
        config_from_dict(data)
    data["auth"] = {"tokens_env": ["GATEWAY_TOKEN"]}
    assert config_from_dict(data).server.host == host


def test_bearer_tokens_accept_only_an_exact_token_and_keep_no_plain_copy():
    tokens = BearerTokens(["first-token-aaaaaaaa", "second-token-bbbbbbbb"])
    assert tokens.accepts("Bearer first-token-aaaaaaaa")
    assert tokens.accepts("bearer second-token-bbbbbbbb")
    for wrong in (
        "",
        "Bearer ",
        "Bearer first-token-aaaaaaa",  # a prefix
        "Bearer first-token-aaaaaaaaa",  # one character more
        "Basic first-token-aaaaaaaa",
        "first-token-aaaaaaaa",
    ):
        assert not tokens.accepts(wrong), wrong
    assert not BearerTokens([]).accepts("Bearer anything")
    assert not BearerTokens([]) and tokens
    # only fixed-length digests are kept: comparisons never depend on a token's length
    assert all(len(d) == 32 for d in tokens._digests)
    assert b"first-token" not in b"".join(tokens._digests)


async def test_auth_guards_the_api_but_not_the_probes():
    async with running_stack(with_auth, env={"OPS_TOKEN": TOKEN}) as stack:
        status, headers, body = await stack.chat({"model": "claude", "messages": USER})
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert orjson.loads(body)["error"]["type"] == "authentication_error"
        status, _, _ = await stack.chat(
            {"model": "claude", "messages": USER}, {"Authorization": "Bearer nope"}
        )
        assert status == 401
        status, _, _ = await stack.get("/v1/models")
        assert status == 401
        status, _, _ = await stack.chat({"model": "claude", "messages": USER}, AUTH)
        assert status == 200
        for probe in ("/healthz", "/readyz"):
            status, _, _ = await stack.get(probe)
            assert status == 200, probe
        assert stack.hub.states["anthropic"].requests[-1].headers.get("x-api-key") != TOKEN


# -- /metrics -------------------------------------------------------------------------------


def _request_from(peer: str, headers: dict[str, str] | None = None) -> web.Request:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        (peer, 40000) if name == "peername" else default
    )
    return make_mocked_request("GET", "/metrics", headers=headers or {}, transport=transport)


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_metrics_are_open_to_loopback_peers_only_without_tokens(peer):
    check_access(_request_from(peer), BearerTokens([]))
    # with tokens, a local process (or a browser page) is not trusted for being local...
    with pytest.raises(ClientError) as refused:
        check_access(_request_from(peer), BearerTokens([TOKEN]))
    assert refused.value.status == 401
    check_access(_request_from(peer, AUTH), BearerTokens([TOKEN]))
    # ...unless [auth] metrics_from_loopback_without_token opens it to a local Prometheus
    check_access(_request_from(peer), BearerTokens([TOKEN]), metrics_loopback_open=True)


@pytest.mark.parametrize("peer", ["10.1.2.3", "192.0.2.7", "2001:db8::1", "::ffff:10.0.0.1"])
def test_metrics_from_another_host_need_a_token(peer):
    with pytest.raises(ClientError) as refused:
        check_access(_request_from(peer), BearerTokens([]))
    assert refused.value.status == 403  # no tokens configured: nothing would let it in
    with pytest.raises(ClientError) as refused:
        check_access(_request_from(peer, {"Authorization": "Bearer wrong"}), BearerTokens([TOKEN]))
    assert refused.value.status == 401
    check_access(_request_from(peer, AUTH), BearerTokens([TOKEN]))


@pytest.mark.parametrize("header", ["X-Forwarded-For", "Forwarded", "X-Real-IP"])
def test_a_proxied_loopback_request_is_not_local(header):
    with pytest.raises(ClientError) as refused:
        check_access(_request_from("127.0.0.1", {header: "203.0.113.9"}), BearerTokens([]))
    assert refused.value.status == 403


def test_loopback_addresses():
    assert is_loopback_address("127.0.0.1") and is_loopback_address("::1")
    assert is_loopback_address("fe80::1%lo") is False
    assert not is_loopback_address("") and not is_loopback_address(None)
    assert not is_loopback_address("localhost.evil.example")


async def test_metrics_over_http_from_loopback_with_and_without_auth():
    async with running_stack() as stack:
        status, _, body = await stack.get("/metrics")
        assert status == 200 and b"gateway_requests_total" in body
        status, _, _ = await stack.get("/metrics", {"X-Forwarded-For": "198.51.100.4"})
        assert status == 403
    async with running_stack(with_auth, env={"OPS_TOKEN": TOKEN}) as stack:
        status, _, _ = await stack.get("/metrics")
        assert status == 401  # with [auth], loopback scrapers need the token too
        status, _, _ = await stack.get("/metrics", AUTH)
        assert status == 200
        status, _, _ = await stack.get("/metrics", {"X-Forwarded-For": "198.51.100.4"})
        assert status == 401
        status, _, _ = await stack.get("/metrics", {"X-Forwarded-For": "198.51.100.4", **AUTH})
        assert status == 200


# -- what crosses the gateway ---------------------------------------------------------------

CLIENT_SECRETS = {
    "x-api-key": "client-x-api-key-value-0001",
    "Cookie": "session=client-cookie-value-0002",
    "X-Forwarded-Host": "client-forwarded-host-0003.example",
    "OpenAI-Organization": "client-org-value-0004",
    "anthropic-beta": "client-beta-value-0005",
}
CLIENT_BODY_FIELDS = {
    "base_url": "http://client-base-url-0006.example/v1",
    "api_base": "http://client-api-base-0007.example",
    "api_key": "client-body-api-key-0008",
    "extra_headers": {"Authorization": "Bearer client-extra-header-0009"},
}


@pytest.mark.parametrize("authenticated", [False, True], ids=["open", "auth"])
async def test_client_credentials_cookies_and_base_urls_never_reach_an_upstream(authenticated):
    client_authorization = AUTH if authenticated else {"Authorization": "Bearer client-own-key-0010"}
    adjust = with_auth if authenticated else None
    async with running_stack(adjust, env={"OPS_TOKEN": TOKEN}) as stack:
        for name, kind, _, _ in FAMILIES:
            for stream in (False, True):
                stack.hub.states[kind].push(Reply(text="fine"))
                status, headers, _ = await stack.chat(
                    {"model": name, "messages": USER, "stream": stream, **CLIENT_BODY_FIELDS},
                    {**CLIENT_SECRETS, **client_authorization},
                )
                assert status == 200, (name, stream)
                assert "set-cookie" not in {h.lower() for h in headers}
        planted = [*CLIENT_SECRETS.values(), *client_authorization.values(), "client-"]
        for kind, state in stack.hub.states.items():
            assert len(state.requests) == 2, kind
            for recorded in state.requests:
                headers = {str(k): v for k, v in recorded.headers.items()}
                wire = orjson.dumps({"path": recorded.path, "headers": headers, "body": recorded.body})
                for value in planted:
                    assert value.encode() not in wire, (kind, value)
                names = {h.lower() for h in recorded.headers}
                assert names <= UPSTREAM_REQUEST_HEADERS, (kind, names - UPSTREAM_REQUEST_HEADERS)
                assert recorded.headers.get("User-Agent", "").startswith("llm-transcript-gateway/")


async def test_client_responses_carry_only_the_gateways_own_headers(stack):
    for name, kind, _, _ in FAMILIES:
        for stream in (False, True):
            stack.hub.states[kind].push(Reply(text="fine"))
            status, headers, _ = await stack.chat({"model": name, "messages": USER, "stream": stream})
            assert status == 200
            for header in headers:
                lower = header.lower()
                assert lower in CLIENT_RESPONSE_HEADERS or lower.startswith(GATEWAY_HEADER_PREFIX), header
            assert headers["Server"] == SERVER_HEADER  # no library and version banner
            # the simulators answer with their own request ids; none reaches the client
            assert "request-id" not in {h.lower() for h in headers}
            assert headers.get("X-Request-Id", "") == "" or not headers["X-Request-Id"].startswith("req_")
    for path in ("/healthz", "/metrics", "/v1/models", "/nowhere"):
        _, headers, _ = await stack.get(path)
        assert headers["Server"] == SERVER_HEADER


async def test_the_upstream_allow_list_drops_any_other_header_and_says_so_once(caplog):
    seen: list[dict[str, str]] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append({k.lower(): v for k, v in request.headers.items()})
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/", echo)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with client_session() as session:
            for _ in range(3):
                headers = {
                    "x-api-key": "k",
                    "X-Forwarded-For": "1.2.3.4",
                    "Cookie": "a=b",
                    "X-Ops-Test-Only": "1",
                }
                request = HttpRequest(f"http://127.0.0.1:{port}/", headers, b"{}")
                async with Upstream(session, request, Timeouts(), stream=False) as upstream:
                    assert upstream.status == 200
                    assert await upstream.read() == b"ok"
                assert len(headers) == 4  # the adapter's own mapping is left as it was
    finally:
        await runner.cleanup()
    assert len(seen) == 3
    for headers in seen:
        assert headers["x-api-key"] == "k"
        assert not {"x-forwarded-for", "cookie", "x-ops-test-only"} & set(headers)
    warnings = [r.getMessage() for r in caplog.records if "dropped upstream request header" in r.getMessage()]
    assert len([w for w in warnings if "X-Ops-Test-Only" in w]) == 1  # once per name, not per request


async def test_the_client_response_allow_list_strips_foreign_headers():
    response = web.Response(
        text="x", headers={"Set-Cookie": "a=b", "request-id": "req_1", "X-Gateway-Attempts": "1"}
    )
    response.headers.add("X-Upstream", "1")
    response.headers.add("X-Upstream", "2")  # a repeated header goes as a whole
    await restrict_response_headers(make_mocked_request("GET", "/"), response)
    assert dict(response.headers) == {
        "Content-Type": "text/plain; charset=utf-8",
        "X-Gateway-Attempts": "1",
        "Server": SERVER_HEADER,
    }


async def test_a_set_of_names_found_allowed_once_does_not_let_another_through():
    names = {"X-Gateway-Attempts": "1", "X-Request-Id": "r"}
    for extra in ({}, {}, {"X-Upstream": "1"}, {"Set-Cookie": "a=b"}, {}):
        response = web.Response(text="x", headers={**names, **extra})
        await restrict_response_headers(make_mocked_request("GET", "/"), response)
        assert dict(response.headers) == {
            "Content-Type": "text/plain; charset=utf-8",
            **names,
            "Server": SERVER_HEADER,
        }


# -- request bodies -------------------------------------------------------------------------

LIMIT = 64 * 1024


def small_limit(config: dict) -> None:
    config["server"]["max_body_bytes"] = LIMIT


async def _raw_exchange(url: str, head: bytes, body: bytes = b"") -> bytes:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head + body)
        await writer.drain()
        # the server closes the connection after a 413: read to the end (a hang guard only)
        return await asyncio.wait_for(reader.read(), timeout=30)
    finally:
        writer.close()


async def test_an_oversized_content_length_is_refused_before_the_body_is_sent():
    async with running_stack(small_limit) as stack:
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (LIMIT + 1)
        )
        answer = await _raw_exchange(stack.url, head)  # not one byte of the body was written
        status_line, _, rest = answer.partition(b"\r\n")
        assert status_line == b"HTTP/1.1 413 Request Entity Too Large"
        body = orjson.loads(rest.partition(b"\r\n\r\n")[2])
        assert body["error"]["code"] == "body_too_large"
        assert stack.hub.states["anthropic"].requests == []


async def test_a_chunked_body_is_refused_once_it_passes_the_limit():
    async with running_stack(small_limit) as stack:
        sent = 0

        async def chunks():
            nonlocal sent
            yield b'{"model": "claude", "messages": [], "pad": "'
            for _ in range(64):  # 64 x 8 KiB: eight times the limit
                sent += 8192
                yield b"a" * 8192
            yield b'"}'

        async with stack.http.post(stack.url + "/v1/chat/completions", data=chunks()) as resp:
            assert resp.status == 413
            assert (await resp.json())["error"]["code"] == "body_too_large"


async def test_decompressed_size_counts_against_the_limit():
    async with running_stack(small_limit) as stack:
        stack.hub.states["anthropic"].push(Reply(text="fine"))
        fine = gzip.compress(orjson.dumps({"model": "claude", "messages": USER}))
        async with stack.http.post(
            stack.url + "/v1/chat/completions", data=fine, headers={"Content-Encoding": "gzip"}
        ) as resp:
            assert resp.status == 200  # compressed requests are welcome
        bomb = gzip.compress(orjson.dumps({"model": "claude", "messages": USER, "pad": "a" * (LIMIT * 40)}))
        assert len(bomb) < LIMIT // 4
        async with stack.http.post(
            stack.url + "/v1/chat/completions", data=bomb, headers={"Content-Encoding": "gzip"}
        ) as resp:
            assert resp.status == 413
        assert len(stack.hub.states["anthropic"].requests) == 1


async def test_json_nesting_deeper_than_the_limit_is_a_400(stack):
    deep = b'{"model": "claude", "messages": ' + b"[" * 70 + b"]" * 70 + b"}"
    async with stack.http.post(stack.url + "/v1/chat/completions", data=deep) as resp:
        assert resp.status == 400
        assert "nesting deeper than 64" in (await resp.json())["error"]["message"]
    hostile = b'{"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    async with stack.http.post(stack.url + "/v1/chat/completions", data=hostile) as resp:
        assert resp.status == 400
    status, _, _ = await stack.get("/healthz")
    assert status == 200


# -- upstream SSE line limit ----------------------------------------------------------------


def _chunk(content: str) -> bytes:
    delta = {"role": "assistant", "content": content}
    chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": None}]
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


class EndlessLineUpstream:
    """An OpenAI-compatible upstream whose stream turns into one line longer than the limit,
    either at once or after a first content chunk."""

    def __init__(self) -> None:
        self.port = free_port()
        self.sent_before_line: list[bytes] = []
        self.runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for frame in self.sent_before_line:
            await response.write(frame)
        try:
            await response.write(b"data: " + b"x" * (DEFAULT_MAX_LINE + 4096))
            await response.write(b"\n\n")
        except ConnectionError:
            pass  # the gateway gave up on the line, as it should
        return response

    async def __aenter__(self) -> EndlessLineUpstream:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self.runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=0.5)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def test_an_endless_upstream_sse_line_is_a_controlled_error():
    async with EndlessLineUpstream() as upstream:

        def add_upstream(config: dict) -> None:
            config["providers"]["endless"] = {
                "kind": "openai_chat",
                "base_url": f"http://127.0.0.1:{upstream.port}/v1",
                "api_key_env": "GATEWAY_DEMO_KEY",
            }
            config["models"]["endless"] = {"targets": [{"provider": "endless", "model": "m"}]}

        async with running_stack(add_upstream) as stack:
            # before the first token: the attempt fails and the client gets a 502
            status, _, body = await stack.chat({"model": "endless", "messages": USER, "stream": True})
            assert status == 502
            error = orjson.loads(body)["error"]
            assert "SSE line longer than" in error["message"] and error["code"] == "protocol"

            # after the first token: the stream ends with one error event
            upstream.sent_before_line = [_chunk("Hello")]
            async with stack.http.post(
                stack.url + "/v1/chat/completions",
                data=orjson.dumps({"model": "endless", "messages": USER, "stream": True}),
            ) as resp:
                assert resp.status == 200
                frames = (await resp.read()).decode().strip().split("\n\n")
            assert '"content":"Hello"' in frames[1]
            error = orjson.loads(frames[-1].removeprefix("data: "))["error"]
            assert "SSE line longer than" in error["message"]

            status, _, _ = await stack.get("/healthz")
            assert status == 200
            attempts = stack.metrics.registry.get_sample_value(
                "gateway_upstream_attempts_total", {"provider": "endless", "outcome": "protocol"}
            )
            assert attempts is not None and attempts >= 1
