"""A streamed answer's writes to the socket: the status line and headers go out with the first
write (not alone at `prepare`), and the dialect's ending with the chunked body's end; the
connection's send buffer is bounded once."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from types import SimpleNamespace
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.http_writer import StreamWriter
from aiohttp.test_utils import make_mocked_request

from gateway import answering
from gateway.state import stream_response
from gateway.stream_head import stream_head

# aiohttp's response (an app with other prepare hooks) and the gateway's pre-built head
MAKERS = pytest.mark.parametrize("make", [stream_response, stream_head], ids=["aiohttp", "pre-built"])


class Transport:
    """Records each write the response makes to its socket."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def writelines(self, parts: list[bytes]) -> None:
        self.sent.append(b"".join(parts))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


async def _prepared(make: Callable[..., web.StreamResponse]) -> tuple[Transport, web.StreamResponse]:
    """A streamed answer prepared (as `answer_stream` does) over a recording transport."""
    transport = Transport()
    # the request handler: only its transport and flow control are used once the answer starts
    protocol = mock.Mock(transport=transport, writing_paused=False, _drain_helper=mock.AsyncMock())
    writer = StreamWriter(protocol, asyncio.get_running_loop())  # type: ignore[arg-type]
    request = make_mocked_request(
        "POST", "/v1/chat/completions", writer=writer, transport=transport, protocol=protocol
    )
    response = make(request, {"Content-Type": "text/event-stream"}, False)
    await response.prepare(request)
    return transport, response


@MAKERS
async def test_headers_share_the_first_write_and_the_ending_shares_the_last(make):
    transport, response = await _prepared(make)
    assert transport.sent == [], "the headers went out alone"
    await response.write(b"data: 1\n\n")
    assert len(transport.sent) == 1
    head, _, body = transport.sent[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Transfer-Encoding: chunked" in head
    assert body == b"9\r\ndata: 1\n\n\r\n"
    await response.write_eof(b"data: [DONE]\n\n")
    assert transport.sent[1:] == [b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"]


@MAKERS
async def test_an_answer_held_whole_goes_out_in_one_write_with_its_headers(make):
    """What `answer_stream` writes when the relay held an answer read whole (Relay.held): the
    headers, the events and the chunked body's end in one send."""
    transport, response = await _prepared(make)
    await response.write_eof(b"data: 1\n\n" + b"data: [DONE]\n\n")
    assert len(transport.sent) == 1
    head, _, body = transport.sent[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Transfer-Encoding: chunked" in head
    assert body == b"17\r\ndata: 1\n\ndata: [DONE]\n\n\r\n0\r\n\r\n"


class CountingSocket:
    """A socket whose options are counted (what uvloop's socket stand-in would be asked)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.calls = 0

    def setsockopt(self, *args: int) -> None:
        self.calls += 1
        self.sock.setsockopt(*args)


def test_a_connections_send_buffer_is_bounded_once_for_all_its_streams():
    left, right = socket.socketpair()
    with left, right:
        counted = CountingSocket(left)
        transport = mock.Mock()
        transport.get_extra_info.side_effect = lambda name, default=None: (
            counted if name == "socket" else default
        )
        http = SimpleNamespace(transport=transport)
        answering._bound_kernel_buffer(http)  # type: ignore[arg-type]
        answering._bound_kernel_buffer(http)  # type: ignore[arg-type]  # its next stream
        assert counted.calls == 1
        # Linux reports twice what was set (its bookkeeping)
        assert left.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) in (
            answering.STREAM_SEND_BUFFER,
            2 * answering.STREAM_SEND_BUFFER,
        )
        other = mock.Mock()
        other.get_extra_info.side_effect = transport.get_extra_info.side_effect
        answering._bound_kernel_buffer(SimpleNamespace(transport=other))  # type: ignore[arg-type]
        assert counted.calls == 2, "another connection is bounded too"
