"""Malformed and misdirected requests: every route walked with every wrong method, unknown paths,
JSON scalars, bodies that do not decompress and requests aiohttp cannot parse are each a 4xx in
the dialect's error envelope, counted and logged, without an ERROR log line; never a 500."""

from __future__ import annotations

import gzip
import logging
import re

import orjson
import pytest

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.demo import DEMO_KEY_ENV
from gateway.http_errors import DIALECTS, UNROUTED, ingress_label
from tests.ops.conftest import access_lines, base_config
from tests.security.conftest import USER, read_until_closed, serving, split_response

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
UNKNOWN_PATHS = (
    "/",
    "/nope",
    "/v1",
    "/v1/",
    "/v1/embeddings",
    "/v1/completions",
    "/v1/chat/completions/extra",
    "/v1/models/claude/extra",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/messages/batches",
    "/v1/responses",
    "/metrics/x",
    "/v1/chat/completions%00",
    "/" + "a" * 5000,
)


def _routes() -> dict[str, set[str]]:
    """Every path the gateway serves and its methods, read from the app's own router (a new route
    is walked without editing this test)."""
    from gateway.simulators.base import SimulatorHub

    hub = SimulatorHub()  # not started: only its URLs go into the config
    hub.port = 1
    app = create_app(config_from_dict(base_config(hub)), {DEMO_KEY_ENV: "unused-key-0123456789"})
    routes: dict[str, set[str]] = {}
    for route in app.router.routes():
        if route.name == UNROUTED:  # the catch-all that answers what no route takes
            continue
        info = route.resource.get_info() if route.resource is not None else {}
        # a dynamic resource (/inspector/api/requests/{id}) is walked with "x" for each variable
        path = info.get("path") or re.sub(r"\{[^}]*\}", "x", info["formatter"])
        routes.setdefault(path, set()).add(route.method)
    return routes


ROUTES = _routes()
GOOGLE_KINDS = {"UNIMPLEMENTED": "invalid_request_error", "NOT_FOUND": "not_found_error"}


def _error(path: str, body: bytes) -> tuple[str, str]:
    """(type, message) from the envelope of the dialect that owns `path`."""
    decoded = orjson.loads(body)
    if ingress_label(path) in (
        "gemini",
        "gemini_count_tokens",
    ):  # Google's envelope: its status names the kind
        assert set(decoded["error"]) == {"code", "message", "status", "details"}
        return GOOGLE_KINDS[decoded["error"]["status"]], decoded["error"]["message"]
    if ingress_label(path) in ("anthropic_messages", "anthropic_count_tokens"):
        assert decoded["type"] == "error" and set(decoded["error"]) == {"type", "message"}
        return decoded["error"]["type"], decoded["error"]["message"]
    assert set(decoded["error"]) == {"message", "type", "param", "code"}
    return decoded["error"]["type"], decoded["error"]["message"]


def _no_errors_logged(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not bad, [r.getMessage() for r in bad]


async def test_every_wrong_method_is_a_405_with_allow_and_every_unknown_path_a_404(caplog):
    caplog.set_level(logging.INFO)
    assert set(ROUTES) >= {"/v1/chat/completions", "/v1/models", "/healthz", "/readyz", "/metrics"}
    async with serving() as gateway:
        asked = 0
        for path, allowed in ROUTES.items():
            for method in METHODS:
                if method in allowed:
                    continue
                status, headers, body = await gateway.request(method, path)
                asked += 1
                assert status == 405, (method, path, status)
                assert set(headers["Allow"].split(", ")) == allowed, (method, path)
                if method != "HEAD":
                    assert headers["Content-Type"].startswith("application/json")
                    kind, message = _error(path, body)
                    assert kind == "invalid_request_error" and method in message and path in message
        for path in UNKNOWN_PATHS:
            if path in ROUTES:  # a dialect landed on it since: walked above with wrong methods
                continue
            for method in METHODS:
                status, headers, body = await gateway.request(method, path)
                asked += 1
                assert status == 404, (method, path, status)
                if method != "HEAD":
                    kind, message = _error(path, body)
                    assert kind == "not_found_error" and "no such endpoint" in message
                    assert len(message.split(" (endpoints: ")[0]) < 300  # a long path is quoted, bounded
        # each one counted, under the ingress its path belongs to, and given an access-log line
        counted = sum(
            gateway.sample(
                "gateway_requests_total",
                ingress=ingress,
                model="unknown",
                provider="none",
                outcome="client_error",
            )
            for ingress in dict.fromkeys(  # the Gemini API's two records share their labels
                (
                    *(d.ingress for d in DIALECTS),
                    *(d.count.ingress for d in DIALECTS if d.count is not None),
                    UNROUTED,
                )
            )
        )
        assert counted == asked
        assert gateway.sample(
            "gateway_requests_total",
            ingress="anthropic_messages",
            model="unknown",
            provider="none",
            outcome="client_error",
        ) == (len(METHODS) - 1) + len(METHODS)  # the POST-only Messages route, the unknown batches path
        # count_tokens, POST-only too, is counted as its own ingress
        assert (
            gateway.requests("anthropic_count_tokens", "client_error", "unknown", "none") == len(METHODS) - 1
        )
        lines = access_lines(caplog)
        assert len(lines) == asked and {line["status"] for line in lines} == {404, 405}
        await gateway.serves_normally()
    _no_errors_logged(caplog)


async def test_anthropic_paths_answer_in_the_anthropic_envelope():
    async with serving() as gateway:
        for path in ("/v1/messages/batches", "/v1/messages/count_tokens/x"):
            status, _, body = await gateway.chat({"model": "claude", "messages": USER}, path=path)
            assert status == 404
            error = orjson.loads(body)
            assert error["type"] == "error" and error["error"]["type"] == "not_found_error"
            # the 404 says which endpoints exist, so a wrong base URL shows in the error alone
            message = error["error"]["message"]
            assert message.startswith(f"no such endpoint: POST {path} (endpoints: ")
            assert "POST /v1/messages," in message and "POST /v1/chat/completions" in message
        status, _, body = await gateway.request("GET", "/v1/messages")
        assert status == 405 and orjson.loads(body)["error"]["type"] == "invalid_request_error"
        # a path under the Responses dialect that does not exist answers in the OpenAI envelope
        status, _, body = await gateway.chat({"model": "claude"}, path="/v1/responses/abc/cancel")
        assert status == 404 and orjson.loads(body)["error"]["code"] == "unknown_url"


async def test_json_scalar_bodies_and_bodies_that_do_not_decompress_are_400s(caplog):
    """`null`, `5`, `true`... and broken gzip / deflate streams used to be 500s."""
    async with serving() as gateway:
        for scalar in (b"null", b"5", b"true", b"false", b'"text"', b"-0.5e3"):
            status, _, body = await gateway.chat(scalar)
            assert status == 400, (scalar, body)
            assert orjson.loads(body)["error"]["message"] == "request body must be a JSON object"
        for encoding, body, code in (
            ("gzip", b"this is not gzip at all", "invalid_body"),
            ("deflate", b"\x00\x01\x02 not deflate", "invalid_body"),
            # aiohttp does not check a gzip trailer: a cut stream inflates to cut JSON
            ("gzip", gzip.compress(orjson.dumps({"model": "claude", "messages": USER}))[:-12], None),
        ):
            status, _, answer = await gateway.chat(body, {"Content-Encoding": encoding})
            assert status == 400, (encoding, answer)
            error = orjson.loads(answer)["error"]
            assert error["code"] == code
            if code is not None:
                assert encoding in error["message"]
        await gateway.serves_normally()
    _no_errors_logged(caplog)


RAW_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
BODY = orjson.dumps({"model": "claude", "messages": USER})


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (
            RAW_HEAD + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(BODY), len(BODY)) + BODY,
            400,
            "malformed_request",
        ),
        (
            RAW_HEAD + b"X-Padding: " + b"a" * 9000 + b"\r\nContent-Length: 2\r\n\r\n{}",
            431,
            "header_too_large",
        ),
        (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", 431, "header_too_large"),
        (RAW_HEAD + b"".join(b"X-H%d: 1\r\n" % i for i in range(200)) + b"\r\n", 400, "malformed_request"),
        (
            RAW_HEAD + b"Content-Encoding: br\r\nContent-Length: 4\r\n\r\nabcd",
            415,
            "unsupported_content_encoding",
        ),
        (
            RAW_HEAD + b"Content-Encoding: zstd\r\nContent-Length: 4\r\n\r\nabcd",
            415,
            "unsupported_content_encoding",
        ),
        (RAW_HEAD + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}", 400, "malformed_request"),
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
            400,
            "malformed_request",
        ),  # TLS to HTTP
    ],
    ids=[
        "duplicate-content-length",
        "long-header",
        "long-request-line",
        "too-many-headers",
        "br",
        "zstd",
        "length-and-chunked",
        "tls-hello",
    ],
)
async def test_requests_aiohttp_cannot_parse_are_answered_in_the_envelope(
    request_bytes, status, code, caplog
):
    caplog.set_level(logging.INFO)
    async with serving() as gateway:
        reader, writer = await gateway.connect()
        writer.write(request_bytes)
        await writer.drain()
        raw = await read_until_closed(reader)
        writer.close()
        got_status, headers, body = split_response(raw)
        assert got_status == status, raw[:300]
        assert headers["content-type"] == "application/json" and headers["server"] == "llm-transcript-gateway"
        error = orjson.loads(body)["error"]
        assert error["code"] == code
        assert b"aaaaaaaaaa" not in body  # the offending bytes are not echoed back
        # counted under the dialect of the request line's path, when one arrived whole
        ingress = "chat_completions" if request_bytes.startswith(RAW_HEAD) else UNROUTED
        assert gateway.requests(ingress, "client_error", "unknown", "none") == 1
        assert [line["status"] for line in access_lines(caplog)] == [status]
        await gateway.serves_normally()
    _no_errors_logged(caplog)


async def test_the_gateways_own_401_message_is_not_mangled_by_redaction():
    def with_auth(config: dict) -> None:
        config["auth"] = {"tokens_env": ["SEC_TOKEN"]}

    token = "sec-client-token-4Rk8Qw2Zp6Ym1Nx3"
    async with serving(with_auth, env={"SEC_TOKEN": token}) as gateway:
        status, headers, body = await gateway.chat({"model": "claude", "messages": USER})
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert orjson.loads(body)["error"]["message"] == "missing or invalid bearer token"
        status, _, body = await gateway.chat(
            {"model": "claude", "messages": USER}, {"Authorization": "Bearer wrong-but-long-1234"}
        )
        assert status == 401 and orjson.loads(body)["error"]["message"] == "missing or invalid bearer token"
        await gateway.serves_normally({"Authorization": f"Bearer {token}"})


def test_the_envelope_registry_matches_paths_not_prefixes_of_words():
    assert ingress_label("/v1/messages") == "anthropic_messages"
    assert ingress_label("/v1/messages/count_tokens") == "anthropic_count_tokens"
    assert ingress_label("/v1/messages/count_tokensx") == "anthropic_messages"
    assert ingress_label("/v1/messagesx") == UNROUTED
    assert ingress_label("/v1/chat/completions") == "chat_completions"
    assert ingress_label("/v1/responses/abc/cancel") == "responses"
    assert ingress_label("/healthz") == UNROUTED
    assert ingress_label("/v1beta/models/gemini:countTokens") == "gemini_count_tokens"
    assert ingress_label("/v1/models/gemini:countTokens") == "gemini_count_tokens"
    assert ingress_label("/v1beta/models/gemini:countTokensx") == "gemini"
    assert ingress_label("/v1/models/gemini") == "gemini"
    assert ingress_label("/v1/models") == UNROUTED
