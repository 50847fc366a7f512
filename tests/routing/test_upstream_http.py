"""The provider calls' HTTP/1.1 client (gateway/upstream_http.py) against real loopback servers
that write exact bytes: every framing of an answer, keep-alive reuse and when a connection must
not be reused, a reset mid-body, a stall before the headers, backpressure on a slow reader, and
compressed answers; plus the chunked framing split at arbitrary points (hypothesis)."""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import socket
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import eventloop
from gateway.providers.base import HttpRequest
from gateway.transcript.events import ErrorCategory
from gateway.upstream import (
    MAX_STREAM_CHUNK,
    UPSTREAM_READ_BUFFER,
    USER_AGENT,
    Timeouts,
    Upstream,
    UpstreamFailure,
    client_session,
)
from gateway.upstream_connection import Connection
from gateway.upstream_http import _JOIN_MAX, HttpClient
from tests.routing.upstream_reads import next_chunk

Answer = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]  # -> keep the connection


class Server:
    """A loopback server that answers each request with what `answer` writes."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                self.requests.append(head + await reader.readexactly(length))
                if not await self.answer(head, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1/x"

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()


def writes(*parts: bytes, keep: bool = True, pause: float = 0.0) -> Answer:
    async def answer(head: bytes, writer: asyncio.StreamWriter) -> bool:
        for part in parts:
            writer.write(part)
            await writer.drain()
            if pause:
                await asyncio.sleep(pause)
        return keep

    return answer


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    async with client_session() as session:
        yield session


async def call(client: HttpClient, url: str, stream: bool = False, timeouts: Timeouts | None = None):
    request = HttpRequest(url, {"content-type": "application/json", "x-api-key": "sk-secret"}, b'{"a":1}')
    async with Upstream(client, request, timeouts or Timeouts(), stream=stream) as upstream:
        if stream:
            chunks = []
            while chunk := await next_chunk(upstream):
                chunks.append(chunk)
            return upstream.status, upstream.headers, b"".join(chunks)
        return upstream.status, upstream.headers, await upstream.read()


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


async def test_content_length_and_the_request_as_sent(client):
    async with Server(
        writes(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Request-Id: r1\r\n\r\nhello")
    ) as url:
        status, headers, body = await call(client, url)
        assert (status, body) == (200, b"hello")
        assert headers["x-request-id"] == headers["X-Request-ID"] == "r1"


async def _sent(bodies: list[bytes]) -> list[bytes]:
    """What a server read of each POST of `bodies` in turn (one kept-alive connection)."""
    server = Server(writes(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
    async with client_session() as client, server as url:
        for body in bodies:
            request = HttpRequest(url, {"content-type": "application/json"}, body)
            async with Upstream(client, request, Timeouts()) as upstream:
                assert (upstream.status, await upstream.read()) == (200, b"ok")
    assert server.connections == 1
    return server.requests


@pytest.mark.parametrize(
    "loop",
    [
        "asyncio",
        pytest.param(
            "uvloop",
            marks=pytest.mark.skipif(not importlib.util.find_spec("uvloop"), reason="no uvloop extra"),
        ),
    ],
)
def test_a_body_of_any_length_is_sent_exactly_after_its_head(loop):
    """A short body is joined to its head, a long one written after it by the transport (not
    copied behind it): the server reads the same requests either way, on either event loop."""
    sizes = [0, 7, _JOIN_MAX - 1, _JOIN_MAX, 3 * _JOIN_MAX + 5, 6 << 20, 100]
    bodies = [bytes(range(256)) * (n // 256) + b"z" * (n % 256) for n in sizes]
    requests = eventloop.run(_sent(bodies), loop)
    assert len(requests) == len(bodies)
    for request, body in zip(requests, bodies, strict=True):
        head, _, sent = request.partition(b"\r\n\r\n")
        assert head.startswith(b"POST /v1/x HTTP/1.1\r\n")
        assert b"\r\nContent-Length: %d" % len(body) in head
        assert sent == body


def test_a_calls_head_is_made_once_per_url_and_headers_and_is_exact_every_time():
    client = client_session()
    url = "http://h.example:8080/v1/x?q=1"

    def sent(headers: dict[str, str], body: bytes) -> object:
        return client.request(url, headers, body)._data  # noqa: SLF001 - what the call writes

    first = sent({"x-api-key": "k1", "content-type": "application/json"}, b"{}")
    assert first == (
        b"POST /v1/x?q=1 HTTP/1.1\r\nHost: h.example:8080\r\nx-api-key: k1\r\n"
        b"content-type: application/json\r\nUser-Agent: %b\r\nAccept: */*\r\n"
        b"Accept-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}" % USER_AGENT.encode()
    )
    assert sent({"x-api-key": "k1", "content-type": "application/json"}, b"{}") == first  # made once
    # another value under the same names is another head, never the one made for the first
    other = sent({"x-api-key": "k2", "content-type": "application/json"}, b"[10]")
    assert other == first.replace(b"k1", b"k2").replace(b"Length: 2\r\n\r\n{}", b"Length: 4\r\n\r\n[10]")
    with pytest.raises(ValueError, match="line break"):  # after a clean call with the same names
        sent({"x-api-key": "k1\r\nX-Evil: 1", "content-type": "application/json"}, b"{}")
    long = bytes(_JOIN_MAX)  # written after its head, not joined to it
    assert sent({"x-api-key": "k1", "content-type": "application/json"}, long) == (
        first[: -len(b"2\r\n\r\n{}")] + b"%d\r\n\r\n" % len(long),
        long,
    )


async def test_the_request_carries_framing_and_the_callers_headers():
    seen: list[bytes] = []

    async def answer(head: bytes, writer: asyncio.StreamWriter) -> bool:
        seen.append(head)
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        return True

    async with client_session() as client, Server(answer) as url:
        status, _, body = await call(client, url)
    assert (status, body) == (204, b"")
    lines = seen[0].split(b"\r\n")
    assert lines[0] == b"POST /v1/x HTTP/1.1"
    names = [line.split(b":")[0].lower() for line in lines[1:] if line]
    assert sorted(names) == sorted(
        [
            b"host",
            b"content-type",
            b"x-api-key",
            b"user-agent",
            b"accept",
            b"accept-encoding",
            b"content-length",
        ]
    )
    assert b"Accept-Encoding: identity" in lines and b"Content-Length: 7" in lines


async def test_a_chunked_answer_streamed_and_whole(client):
    body = chunked(b"data: 1\n\n", b"data: 2\n\n", b"x" * 70000)
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    async with Server(writes(head, body[:10], body[10:], pause=0.005)) as url:
        for stream in (True, False):
            status, _, got = await call(client, url, stream=stream)
            assert (status, got) == (200, b"data: 1\n\ndata: 2\n\n" + b"x" * 70000)


async def test_a_close_delimited_http_1_0_answer(client):
    async with Server(
        writes(b"HTTP/1.0 200 OK\r\n\r\npart one, ", b"part two", keep=False, pause=0.005)
    ) as url:
        for stream in (True, False):
            assert (await call(client, url, stream=stream))[2] == b"part one, part two"


async def test_interim_answers_are_skipped(client):
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
    answer += b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Final: 1\r\n\r\nok"
    async with Server(writes(answer)) as url:
        status, headers, body = await call(client, url)
    assert (status, body, headers.get("x-final"), headers.get("link")) == (200, b"ok", "1", None)


async def test_a_connection_is_reused_only_after_a_whole_keep_alive_answer(client):
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    server = Server(writes(plain))
    async with server as url:
        for _ in range(3):
            await call(client, url)
            await call(client, url, stream=True)
    assert server.connections == 1 and len(server.requests) == 6

    closing = Server(writes(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
    async with closing as url:
        for _ in range(3):
            await call(client, url)
    assert closing.connections == 3


async def test_an_abandoned_body_closes_its_connection(client):
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = Server(writes(head, chunked(b"a", b"b")[:6], pause=0.05))  # the end never comes
    async with server as url:
        request = HttpRequest(url, {}, b"{}")
        for _ in range(2):
            async with Upstream(client, request, Timeouts(idle=5)) as upstream:
                assert await next_chunk(upstream) == b"a"
    assert server.connections == 2  # the first one was not pooled with its answer unread


async def test_a_reset_mid_body_is_a_connection_error(client):
    async with Server(writes(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", keep=False)) as url:
        for stream in (True, False):
            with pytest.raises(UpstreamFailure) as failure:
                await call(client, url, stream=stream)
            assert failure.value.error.category is ErrorCategory.CONNECTION
            assert failure.value.error.message.startswith("upstream connection failed (PayloadError")


async def test_a_server_that_closes_before_answering(client):
    async with Server(writes(keep=False)) as url:
        with pytest.raises(UpstreamFailure) as failure:
            await call(client, url)
    assert failure.value.error.category is ErrorCategory.CONNECTION
    assert "ServerDisconnectedError" in failure.value.error.message


async def test_a_refused_connection_names_the_address_never_the_key(client):
    async with Server(writes()) as url:
        pass  # closed: nothing listens on its port any more
    with pytest.raises(UpstreamFailure) as failure:
        await call(client, url)
    error = failure.value.error
    assert error.category is ErrorCategory.CONNECTION
    assert error.message.startswith("upstream connection failed (ConnectError: Cannot connect to 127.0.0.1:")
    assert "sk-secret" not in error.message


async def test_slow_headers_time_out_for_a_stream_and_only_by_total_for_a_whole_answer(client):
    async with Server(writes(b"HTTP/1.1 200 OK\r\n", pause=1.0)) as url:
        with pytest.raises(UpstreamFailure) as failure:
            await call(client, url, stream=True, timeouts=Timeouts(idle=0.1))
        assert (
            failure.value.error.message
            == "upstream timed out (SocketTimeoutError: Timeout on reading data from socket)"
        )
        with pytest.raises(UpstreamFailure) as failure:
            await call(client, url, timeouts=Timeouts(idle=0.05, total=0.2))
        assert failure.value.error.category is ErrorCategory.TIMEOUT
        assert (
            failure.value.error.message == "upstream timed out (TimeoutError: no complete answer within 0.2s)"
        )


async def test_a_garbled_answer_is_a_connection_error(client):
    async with Server(writes(b"NOT HTTP AT ALL\r\n\r\n", keep=False)) as url:
        with pytest.raises(UpstreamFailure) as failure:
            await call(client, url)
    assert failure.value.error.message.startswith(
        "upstream connection failed (HttpError: invalid HTTP answer"
    )


async def test_a_slow_reader_pauses_the_socket_and_resumes_it_when_drained(client):
    body = bytes(range(256)) * 4096  # 1 MiB, much more than the reader may hold
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body)
    async with Server(writes(head, body)) as url:
        request = HttpRequest(url, {}, b"{}")
        async with Upstream(client, request, Timeouts()) as upstream:
            first = await next_chunk(upstream)
            await asyncio.sleep(0.05)  # the server writes; the reader holds at most its bound
            connection = upstream._response._connection  # noqa: SLF001 - its buffer is under test
            assert connection._paused  # noqa: SLF001
            held = connection._size  # noqa: SLF001
            assert 2 * UPSTREAM_READ_BUFFER < held <= 2 * UPSTREAM_READ_BUFFER + 256 * 1024
            chunks = [first]
            while chunk := await next_chunk(upstream):
                assert len(chunk) <= MAX_STREAM_CHUNK
                chunks.append(chunk)
            assert not connection._paused  # noqa: SLF001
    assert b"".join(chunks) == body


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_compressed_answer_is_decoded(client, coding):
    text = b'{"answer": "' + b"words " * 5000 + b'"}'
    packed = gzip.compress(text) if coding == "gzip" else zlib.compress(text)
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % coding.encode()
    async with Server(writes(head, chunked(packed[:100], packed[100:]))) as url:
        for stream in (True, False):
            assert (await call(client, url, stream=stream))[2] == text


async def test_an_unknown_encoding_is_refused_never_handed_on(client):
    async with Server(
        writes(b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 3\r\n\r\nxyz")
    ) as url:
        with pytest.raises(UpstreamFailure) as failure:
            await call(client, url)
    assert (
        failure.value.error.message
        == "upstream connection failed (HttpError: unsupported content encoding 'br')"
    )


async def test_a_header_value_with_a_line_break_is_refused_without_its_value(client):
    request = HttpRequest("http://127.0.0.1:9/", {"x-api-key": "sk-secret\r\nX-Evil: 1"}, b"{}")
    with pytest.raises(UpstreamFailure) as failure:
        async with Upstream(client, request, Timeouts()):
            pass
    assert "sk-secret" not in failure.value.error.message
    assert failure.value.error.category is ErrorCategory.PROTOCOL


async def test_close_shuts_the_pooled_connections():
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    client = client_session()
    async with Server(writes(plain)) as url:
        await call(client, url)
        [[connection]] = client._idle.values()  # noqa: SLF001 - the pool is under test
        await client.close()
        await asyncio.sleep(0)
        assert connection._lost  # noqa: SLF001
        with pytest.raises(UpstreamFailure):
            await call(client, url)


class _Transport:
    def __init__(self) -> None:
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def abort(self) -> None:
        pass


def _body_of(pieces: list[bytes]) -> bytes:
    """Feed `pieces` to a connection as socket reads and read its body to the end."""
    connection = Connection(client_session(), ("http", "x", 80), 2 * UPSTREAM_READ_BUFFER)
    connection.connection_made(_Transport())  # type: ignore[arg-type]
    connection._active = True  # noqa: SLF001 - as once a request was written
    for piece in pieces:
        connection.data_received(piece)
    assert connection.complete and connection.status == 200

    out = []
    while chunk := connection.take(MAX_STREAM_CHUNK):  # complete: every take hands bytes
        assert type(chunk) is bytes
        out.append(chunk)
    return b"".join(out)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.binary(min_size=1, max_size=300), max_size=8),
    st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
)
def test_chunked_framing_split_anywhere_gives_the_same_body(pieces, cuts):
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(*pieces)
    bounds = sorted({0, len(wire), *(c % (len(wire) + 1) for c in cuts)})
    reads = [wire[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    assert _body_of(reads) == b"".join(pieces)


def test_a_compressed_body_split_anywhere_decodes_whole():
    text = b"chunk of text " * 400
    packed = gzip.compress(text)
    wire = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed
    assert _body_of([wire[i : i + 7] for i in range(0, len(wire), 7)]) == text


def test_a_compression_bomb_is_refused_not_inflated(monkeypatch):
    monkeypatch.setattr("gateway.upstream_connection.MAX_INFLATED", 1000)
    packed = gzip.compress(b"\0" * 100_000)
    wire = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed
    connection = Connection(client_session(), ("http", "x", 80), 2 * UPSTREAM_READ_BUFFER)
    connection.connection_made(_Transport())  # type: ignore[arg-type]
    connection._active = True  # noqa: SLF001 - as once a request was written
    connection.data_received(wire)
    assert not connection.complete
    assert "inflating past 1000 bytes" in str(connection._error)  # noqa: SLF001


async def test_ipv6_and_a_name_resolved_once_for_its_ttl(client, monkeypatch):
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    try:
        server = await asyncio.start_server(Server(writes(plain))._serve, "::1", 0)
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    lookups: list[str] = []
    real = loop.getaddrinfo

    async def counted(host, *args, **kwargs):
        lookups.append(host)
        return await real("::1", *args, **kwargs)  # "provider.test" is the IPv6 loopback

    monkeypatch.setattr(loop, "getaddrinfo", counted)
    try:
        assert (await call(client, f"http://[::1]:{port}/v1/x"))[2] == b"ok"
        for _ in range(3):  # Connection: close, so each call connects again
            assert (await call(client, f"http://provider.test:{port}/v1/x"))[2] == b"ok"
    finally:
        server.close()
    assert lookups == ["::1", "provider.test"]


async def test_a_call_cancelled_while_waiting_closes_its_connection(client):
    closed = asyncio.Event()

    async def answer(head: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        return True  # the body never comes; the next read sees the client close

    server = Server(answer)
    original = server._serve

    async def serve(reader, writer):
        await original(reader, writer)
        closed.set()

    server._serve = serve  # type: ignore[method-assign]
    async with server as url:
        for stream in (True, False):
            closed.clear()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.1):
                    await call(client, url, stream=stream)
            await asyncio.wait_for(closed.wait(), 5)  # the provider sees the hang-up
    assert not any(client._idle.values())  # noqa: SLF001 - nothing pooled


def test_bytes_past_the_answer_end_drop_the_connection():
    connection = Connection(client_session(), ("http", "x", 80), 2 * UPSTREAM_READ_BUFFER)
    connection.connection_made(_Transport())  # type: ignore[arg-type]
    connection._active = True  # noqa: SLF001 - as once a request was written
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    connection.data_received(answer)
    assert connection.complete and connection.reusable(0.0)
    connection.data_received(answer)  # unasked for, while the first is still being read
    assert not connection.reusable(0.0)


async def test_a_framing_header_set_by_the_caller_is_refused(client):
    request = HttpRequest("http://127.0.0.1:9/", {"Content-Length": "1"}, b"{}")
    with pytest.raises(UpstreamFailure) as failure:
        async with Upstream(client, request, Timeouts()):
            pass
    assert (
        failure.value.error.message == "an upstream request sets its framing header 'content-length' itself"
    )


async def test_an_address_that_refuses_falls_through_to_the_next(client, monkeypatch):
    plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    async with Server(writes(plain)) as url:
        port = int(url.split(":")[2].split("/")[0])
        loop = asyncio.get_running_loop()
        infos = [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", port)),  # nothing listens there
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
        ]

        async def resolved(host, *args, **kwargs):
            return infos

        monkeypatch.setattr(loop, "getaddrinfo", resolved)
        assert (await call(client, f"http://provider.test:{port}/v1/x"))[2] == b"ok"


async def test_drained_once_the_body_is_in_whole_and_read(client):
    """`Upstream.drained` (the relay holds an answer's last bytes for its ending only then): not
    while body bytes are unread or still to come, yes once its end is in and every byte read, no
    more once released (the connection serves other calls)."""
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    gate = asyncio.Event()

    async def answer(_: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(head + chunked(b"a", b"b")[:-5])  # both pieces, not the body's end
        await writer.drain()
        await gate.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async with Server(answer) as url:
        request = HttpRequest(url, {}, b"{}")
        async with Upstream(client, request, Timeouts(idle=5)) as upstream:
            body = b""
            while body != b"ab":
                body += await next_chunk(upstream)
            assert not upstream.drained(), "the body's end is still to come"
            gate.set()
            async with asyncio.timeout(30):  # a bound against a hang, not a timing assertion
                # the end comes in a socket read of its own: no event to await but that read
                while not upstream.drained():  # noqa: ASYNC110
                    await asyncio.sleep(0.001)
            assert await next_chunk(upstream) == b""
            assert upstream.drained()
        assert not upstream.drained()


async def test_a_streams_wait_for_its_headers_starts_when_the_request_is_written(client, monkeypatch):
    """One watchdog bounds a stream's header wait and its gaps: a connection slower to open than
    `idle` (only `connect` bounds that) is not counted against the headers."""
    connect = client._connect  # noqa: SLF001

    async def slow_connect(*args: object):
        await asyncio.sleep(0.3)
        return await connect(*args)

    monkeypatch.setattr(client, "_connect", slow_connect)
    async with Server(
        writes(b"HTTP/1.1 200 OK\r\n", b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b"hi"))
    ) as url:
        status, _, body = await call(client, url, stream=True, timeouts=Timeouts(idle=0.2))
    assert (status, body) == (200, b"hi")


async def test_a_streams_error_answer_is_read_whole_however_slowly_its_body_comes(client):
    """The idle limit bounds the stream's waits for its answer; an error answer's body (read
    whole to classify it) is bounded by `total` alone, as a whole answer is."""
    head = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\n"
    async with Server(writes(head, b"oops", pause=0.3)) as url:
        request = HttpRequest(url, {}, b"{}")
        async with Upstream(client, request, Timeouts(idle=0.1, total=5), stream=True) as upstream:
            assert upstream.status == 500
            assert await upstream.read() == b"oops"


class _Pooled:
    """What the pool asks of a connection: its key, whether it is still alive."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.key = ("http", "127.0.0.1", 9)
        self.idle_since = 0.0
        self.aborted = False

    def reusable(self, now: float) -> bool:
        return True

    def abort(self) -> None:  # the pool closing at the test's end
        self.aborted = True


async def test_the_connection_given_back_last_is_reused_first(client):
    # newest first: a connection used a moment ago has not restarted TCP slow start (a large
    # body on it needs fewer round trips); the older ones stay idle and expire
    pooled = [_Pooled(name) for name in "abc"]
    for connection in pooled:
        client.give_back(connection)  # type: ignore[arg-type]
    now = asyncio.get_running_loop().time()
    taken = []
    for _ in range(4):
        connection = client._take(pooled[0].key, now)  # noqa: SLF001 - the pool's order is under test
        taken.append(connection.name)
        client.give_back(connection)
    first = client._take(pooled[0].key, now)  # noqa: SLF001
    second = client._take(pooled[0].key, now)  # noqa: SLF001
    assert taken == list("cccc")
    assert (first.name, second.name) == ("c", "b")
    assert not any(connection.aborted for connection in pooled)
