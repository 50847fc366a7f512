"""A whole JSON answer written from its pre-built block (gateway/whole_answer.py) is byte for byte
what aiohttp's Response writes for it through the app's header restriction, and it is used for the
exchange's answers where it applies."""

from __future__ import annotations

import asyncio
import importlib.util
import time
import types
from typing import Any
from unittest import mock

import aiohttp.helpers
import pytest
from aiohttp import web
from aiohttp.http_writer import HttpVersion, StreamWriter
from aiohttp.test_utils import make_mocked_request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway import whole_answer
from gateway.browser import CORS_ORIGIN
from gateway.security import restrict_response_headers, send_and_close
from gateway.state import json_response
from gateway.whole_answer import WholeJson, http_date, json_answer, json_answer_for


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        self.written.append(b"".join(chunks))

    def is_closing(self) -> bool:
        return False

    def can_write_eof(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


class _Protocol:
    def __init__(self, transport: _Transport) -> None:
        self.transport = transport
        self._paused = False
        self.ssl_context = None
        self.peername = None
        self.sockname = None
        self.closed = False

    def force_close(self) -> None:
        self.closed = True


async def _unused(request: web.Request) -> web.Response:
    raise AssertionError("the tests write the answers themselves")


HTTP_11 = HttpVersion(1, 1)


def _app(hooks: tuple[Any, ...] = (restrict_response_headers,)) -> web.Application:
    app = web.Application()
    for hook in hooks:
        app.on_response_prepare.append(hook)
    app.router.add_post("/v1/chat/completions", _unused)
    app.freeze()
    return app


async def _request(
    app: web.Application,
    *,
    version: HttpVersion = HTTP_11,
    closing: bool = False,
    origin: str | None = None,
) -> tuple[web.Request, _Transport]:
    """A request to the app's route as its handler sees it (routed, past the guard), with a
    writer over a transport that keeps what it is given."""
    transport = _Transport()
    protocol = _Protocol(transport)
    writer = StreamWriter(protocol, asyncio.get_running_loop())  # type: ignore[arg-type]
    request = make_mocked_request(
        "POST",
        "/v1/chat/completions",
        # as the guard admits it: a CORS origin is the request's listed Origin
        {"Origin": origin} if origin is not None else None,
        app=app,
        writer=writer,
        protocol=protocol,
        transport=transport,
        version=version,
        closing=closing,
    )
    match = await app.router.resolve(request)
    match.add_app(app)
    match.freeze()
    request._match_info = match
    request[CORS_ORIGIN] = origin
    return request, transport


async def _written(
    make: Any,
    app: web.Application,
    headers: dict[str, str],
    body: bytes,
    *,
    force_close: bool = False,
    **kwargs: Any,
) -> tuple[type, bytes | type, bool | None, int]:
    """What the app writes for the answer `make` builds: the response's type, the bytes (or the
    error raised), its keep-alive and body length as aiohttp reads them after the answer."""
    request, transport = await _request(app, **kwargs)
    try:  # aiohttp refuses a Content-Type header beside its content_type, a line break in a value
        response = make(request, headers, body)
        if force_close:
            response.force_close()
        # as aiohttp's finish_response does
        await response.prepare(request)
        await response.write_eof()
    except ValueError as exc:
        return web.Response, type(exc), None, 0
    return type(response), b"".join(transport.written), response.keep_alive, response.body_length


GATEWAY_HEADERS = {
    "X-Request-Id": "0123456789abcdef0123456789abcdef",
    "X-Gateway-Request-Id": "0123456789abcdef0123456789abcdef",
    "X-Session-Id": "sess-1",
    "X-Gateway-Provider": "openai",
    "X-Gateway-Attempts": "1",
}
BODY = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}'


async def _both(headers: dict[str, str], body: bytes, **kwargs: Any) -> tuple[Any, Any]:
    # the same second for both: the Date header is aiohttp's clock
    with mock.patch("time.time", return_value=1_700_000_000.5):
        app = _app()
        fast = await _written(json_answer_for(app), app, headers, body, **kwargs)
        plain = await _written(json_response, _app(), headers, body, **kwargs)
    return fast, plain


async def test_the_block_is_what_aiohttp_writes() -> None:
    fast, plain = await _both(GATEWAY_HEADERS, BODY)
    assert fast[0] is WholeJson
    assert fast[1:] == plain[1:]
    assert fast[1] == (
        b"HTTP/1.1 200 OK\r\nX-Request-Id: 0123456789abcdef0123456789abcdef\r\n"
        b"X-Gateway-Request-Id: 0123456789abcdef0123456789abcdef\r\nX-Session-Id: sess-1\r\n"
        b"X-Gateway-Provider: openai\r\nX-Gateway-Attempts: 1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 59\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\nServer: llm-transcript-gateway\r\n"
        b"\r\n" + BODY
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"version": HttpVersion(1, 0)},
        {"closing": True},
        {"origin": "https://app.example"},
    ],
    ids=["http-1.0", "client-closes", "cors-origin"],
)
async def test_what_the_block_does_not_cover_is_aiohttp_s_response(kwargs: dict[str, Any]) -> None:
    fast, plain = await _both(GATEWAY_HEADERS, BODY, **kwargs)
    assert fast[0] is web.Response
    assert fast == plain


async def test_closed_by_the_gateway_says_so() -> None:
    fast, plain = await _both(GATEWAY_HEADERS, BODY, force_close=True)
    assert fast[0] is WholeJson
    assert fast[1:] == plain[1:]
    assert b"\r\nConnection: close\r\n\r\n" in fast[1] and fast[2] is False


async def test_another_prepare_hook_takes_aiohttp_s_response() -> None:
    async def other(request: web.BaseRequest, response: web.StreamResponse) -> None:
        response.headers["X-Other"] = "1"

    for hooks in ((restrict_response_headers, other), (other,), ()):
        app = _app(hooks)
        assert json_answer_for(app) is json_response
        with mock.patch("time.time", return_value=1_700_000_000.5):
            fast = await _written(json_answer_for(app), app, GATEWAY_HEADERS, BODY)
            plain = await _written(json_response, _app(hooks), GATEWAY_HEADERS, BODY)
        assert fast[0] is web.Response
        assert fast == plain


def test_an_app_with_a_sub_app_takes_aiohttp_s_response() -> None:
    # a sub-app's routes run its hooks too
    app = web.Application()
    app.on_response_prepare.append(restrict_response_headers)
    app.add_subapp("/sub", web.Application())
    assert json_answer_for(app) is json_response
    assert json_answer_for(_app()) is json_answer


async def test_a_refused_body_s_answer_is_sent_and_closed() -> None:
    # the edge's path for an unread body (gateway/security.py `send_and_close`) forces the close
    request, transport = await _request(_app())
    response = json_answer(request, GATEWAY_HEADERS, BODY)
    assert isinstance(response, WholeJson)
    assert not response.prepared
    limits = mock.Mock(linger_seconds=0.1, linger_bytes=0)
    await send_and_close(request, response, limits)
    assert response.prepared and response.keep_alive is False
    assert request.protocol.closed
    assert "eof" in repr(response)
    assert b"Connection: close\r\n\r\n" + BODY in b"".join(transport.written)


NAMES = st.sampled_from(
    [
        "X-Request-Id",
        "X-Gateway-Request-Id",
        "x-session-id",
        "X-Gateway-Provider",
        "X-Gateway-Attempts",
        "X-Gateway-Reasoning",
        "X-Gateway-Repairs",
        "Retry-After",
        "X-Gateway-100%s",  # allowed: its % is no placeholder
        "X-Gateway-\x01",  # allowed, but aiohttp refuses the control character
        "X-Upstream-Thing",  # off the allow-list: dropped by the hook
        "Content-Type",  # framing: aiohttp refuses it beside content_type
        "Server",
        "Date",
        "Connection",
    ]
)
VALUES = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\tb", "a\x7fb", "\ud800", "stub", "1"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    headers=st.dictionaries(NAMES, VALUES, max_size=6),
    body=st.binary(max_size=300),
    closing=st.booleans(),
    force_close=st.booleans(),
    origin=st.sampled_from([None, None, "https://app.example"]),
    version=st.sampled_from([HttpVersion(1, 1), HttpVersion(1, 1), HttpVersion(1, 0)]),
)
def test_any_answer_is_written_as_aiohttp_writes_it(
    headers: dict[str, str], body: bytes, closing: bool, force_close: bool, origin: str | None, version: Any
) -> None:
    async def run() -> tuple[Any, Any]:
        return await _both(
            headers, body, closing=closing, force_close=force_close, origin=origin, version=version
        )

    fast, plain = asyncio.run(run())
    assert fast[1:] == plain[1:]


OWN_NAMES = st.sampled_from(
    ["X-Request-Id", "X-Gateway-Request-Id", "X-Session-Id", "x-gateway-provider", "X-Gateway-Repairs"]
)
# a header value the gateway writes: printable (ids, names, counts; any script)
LINE = st.text(alphabet=st.characters(categories=("L", "M", "N", "P", "S"), include_characters=" "))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    headers=st.dictionaries(OWN_NAMES, LINE, max_size=5),
    body=st.binary(max_size=3000),
    force_close=st.booleans(),
)
def test_the_gateway_s_answers_take_the_block(
    headers: dict[str, str], body: bytes, force_close: bool
) -> None:
    async def run() -> tuple[Any, Any]:
        return await _both(headers, body, force_close=force_close)

    fast, plain = asyncio.run(run())
    assert fast[0] is WholeJson
    assert fast[1:] == plain[1:]


def _at(second: float) -> types.SimpleNamespace:
    """A `time` module whose clock reads `second`."""
    return types.SimpleNamespace(time=lambda: second, gmtime=time.gmtime)


# from the epoch to the last second of year 9999, whole seconds and between them
@settings(max_examples=300, deadline=None)
@given(st.one_of(st.integers(0, 253_402_300_799), st.floats(0, 253_402_300_799.9)))
def test_the_date_is_written_as_aiohttp_writes_it(second: float) -> None:
    with (
        mock.patch.object(whole_answer, "time", _at(second)),
        mock.patch.object(aiohttp.helpers, "time", _at(second)),
    ):
        assert http_date() == aiohttp.helpers.rfc822_formatted_time()
        assert http_date() == aiohttp.helpers.rfc822_formatted_time()  # once formatted, kept


def test_an_aiohttp_without_its_date_formatter_gets_this_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # the module as it loads where aiohttp.helpers has no rfc822_formatted_time
    monkeypatch.delattr(aiohttp.helpers, "rfc822_formatted_time")
    spec = importlib.util.spec_from_file_location("whole_answer_without", whole_answer.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.rfc822_formatted_time is module.http_date
    assert whole_answer.rfc822_formatted_time is not whole_answer.http_date


async def test_the_block_with_this_date_is_what_aiohttp_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(whole_answer, "rfc822_formatted_time", http_date)
    fast, plain = await _both(GATEWAY_HEADERS, BODY)
    assert fast[0] is WholeJson
    assert fast[1:] == plain[1:]
