"""A streamed answer's writes to the socket: the status line and headers go out with the first
write (not alone at `prepare`), and the dialect's ending with the chunked body's end."""

from __future__ import annotations

import asyncio
from unittest import mock

from aiohttp.http_writer import StreamWriter
from aiohttp.test_utils import make_mocked_request

from gateway.answering import _StreamResponse


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


async def test_headers_share_the_first_write_and_the_ending_shares_the_last():
    transport = Transport()
    # the request handler: only its transport and flow control are used once the answer starts
    protocol = mock.Mock(transport=transport, writing_paused=False, _drain_helper=mock.AsyncMock())
    writer = StreamWriter(protocol, asyncio.get_running_loop())  # type: ignore[arg-type]
    request = make_mocked_request(
        "POST", "/v1/chat/completions", writer=writer, transport=transport, protocol=protocol
    )
    response = _StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    assert transport.sent == [], "the headers went out alone"
    await response.write(b"data: 1\n\n")
    assert len(transport.sent) == 1
    head, _, body = transport.sent[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Transfer-Encoding: chunked" in head
    assert body == b"9\r\ndata: 1\n\n\r\n"
    await response.write_eof(b"data: [DONE]\n\n")
    assert transport.sent[1:] == [b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"]
