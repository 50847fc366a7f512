"""https upstreams (every real provider): the certificate chain and the host name are verified
(SNI sent), and a certificate the client does not trust fails the call as a connection error."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest
import trustme
from aiohttp import web

from gateway.providers.base import HttpRequest
from gateway.transcript.events import ErrorCategory
from gateway.upstream import UPSTREAM_READ_BUFFER, USER_AGENT, Timeouts, Upstream, UpstreamFailure
from gateway.upstream_http import HttpClient
from tests.routing.upstream_reads import next_chunk


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def https_url(ca: trustme.CA) -> AsyncIterator[str]:
    seen_sni: list[str | None] = []

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), headers={"X-Sni": str(seen_sni[-1])})

    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)

    def sni(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        seen_sni.append(name)

    server_context.sni_callback = sni
    app = web.Application()
    app.router.add_post("/v1/x", echo)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - the ephemeral port taken
    try:
        yield f"https://localhost:{port}/v1/x"
    finally:
        await runner.cleanup()


def _client(context: ssl.SSLContext | None) -> HttpClient:
    return HttpClient(user_agent=USER_AGENT, read_buffer=UPSTREAM_READ_BUFFER, ssl_context=context)


async def _post(client: HttpClient, url: str, stream: bool) -> tuple[int, str, bytes]:
    request = HttpRequest(url, {"content-type": "application/json"}, b'{"q": 1}')
    async with Upstream(client, request, Timeouts(connect=5), stream=stream) as upstream:
        if stream:
            body = b""
            while chunk := await next_chunk(upstream):
                body += chunk
        else:
            body = await upstream.read()
        return upstream.status, upstream.headers["X-Sni"], body


async def test_a_trusted_certificate_answers_with_sni_sent_and_the_connection_kept(ca, https_url):
    context = ssl.create_default_context()
    ca.configure_trust(context)
    async with _client(context) as client:
        for stream in (False, True, False):
            assert await _post(client, https_url, stream) == (200, "localhost", b'{"q": 1}')
        assert sum(len(c) for c in client._idle.values()) == 1  # noqa: SLF001 - one connection, reused


async def test_an_untrusted_certificate_is_a_connection_error(https_url):
    async with _client(None) as client:  # the system's trust store: the test CA is not in it
        with pytest.raises(UpstreamFailure) as failure:
            await _post(client, https_url, False)
    error = failure.value.error
    assert error.category is ErrorCategory.CONNECTION
    assert "certificate verify failed" in error.message


async def test_a_certificate_for_another_name_is_refused(ca, https_url):
    context = ssl.create_default_context()
    ca.configure_trust(context)
    async with _client(context) as client:
        with pytest.raises(UpstreamFailure) as failure:
            await _post(client, https_url.replace("localhost", "127.0.0.1"), False)
    assert failure.value.error.category is ErrorCategory.CONNECTION
    assert "certificate verify failed" in failure.value.error.message
