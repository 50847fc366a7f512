"""A streamed answer's status line and headers written from their parts, as gateway/whole_answer.py
writes a whole answer's: aiohttp's `StreamResponse` builds a CIMultiDict of the headers, runs the
`on_response_prepare` signal that restricts them (`restrict_response_headers`), its header
preparation and serialization, about 25 Python calls a stream that a whole answer no longer pays.

The head is handed to aiohttp's writer in the state its own `write_headers` leaves it (the bytes
held for the first write, which sends them with the stream's first chunk; at once for a stream
with no opening to carry them), so every write after it is aiohttp's as before. The bytes are
those aiohttp writes for the same stream, hook included (tests/security/test_stream_head.py
compares them); what this does not cover gets aiohttp's response as before: HTTP/1.0 or a client
that asked to close, a browser's CORS origin, an app with any other prepare hook or a sub-app
(`stream_answer_for`), a header set the allow-list would cut or that holds a framing header or a
character that is not printable, and a writer that is not aiohttp's own as this knows it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_writer import StreamWriter

from gateway.security import SERVER_HEADER
from gateway.state import stream_response
from gateway.whole_answer import header_lines, json_answer, plain_request, rfc822_formatted_time

StreamAnswer = Callable[[web.BaseRequest, Mapping[str, str], bool], web.StreamResponse]

# the status line, the handler's header lines (its Content-Type among them), then what aiohttp
# adds itself as it orders them for a chunked body of unknown length (Transfer-Encoding, Date,
# Server; Connection only when closing an HTTP/1.1 connection, which takes aiohttp's path)
_FORM = (
    b"HTTP/1.1 200 OK\r\n%bTransfer-Encoding: chunked\r\nDate: %b\r\n"
    + f"Server: {SERVER_HEADER}\r\n\r\n".encode()
)
# headers aiohttp or this module write; the handler's Content-Type is kept where it stands
_FRAMING = frozenset({"content-length", "date", "server", "connection", "transfer-encoding"})
_FORMS: dict[tuple[str, ...], str | None] = {}


def stream_answer_for(app: web.Application, json: Callable[..., web.StreamResponse]) -> StreamAnswer:
    """How the app's streamed answers start (`GatewayState.stream_answer`): their head pre-built
    when its whole answers are written as blocks (`json`, `json_answer_for`'s verdict on its
    hooks: the gateway's own header restriction only), else aiohttp's response."""
    return stream_head if json is json_answer else stream_response


def stream_head(request: web.BaseRequest, headers: Mapping[str, str], at_once: bool) -> web.StreamResponse:
    """A 200 stream with the gateway's `headers` (its Content-Type included), its head sent with
    the first write, or at `prepare` when `at_once`."""
    # without a Content-Type aiohttp adds its own, after Transfer-Encoding
    if plain_request(request) and "Content-Type" in headers:
        lines = header_lines(headers, _FORMS, _FRAMING)
        if lines is not None:
            return StreamHead(lines, headers, at_once)
    return stream_response(request, headers, at_once)


class StreamHead(web.StreamResponse):
    """A chunked 200 whose head is built at `prepare` from the header lines. aiohttp's response
    otherwise: its `write` and `write_eof` go through the request's writer as before."""

    def __init__(self, lines: bytes, headers: Mapping[str, str], at_once: bool) -> None:
        super().__init__()
        self._lines = lines
        self._given = headers  # for aiohttp's own path, should the writer not be the one known
        self._at_once = at_once

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self._eof_sent:
            return None
        if self._payload_writer is not None:
            return self._payload_writer
        writer = request.writer
        # what `write_headers` leaves (the head held for the first write): aiohttp's writer as
        # this module knows it, else its own path
        if not (
            type(writer) is StreamWriter
            and getattr(writer, "_headers_buf", False) is None
            and getattr(writer, "_headers_written", True) is False
        ):
            self._headers.update(self._given)
            self._send_headers_immediately = self._at_once
            return await super().prepare(request)
        self._req = request
        self._payload_writer = writer
        self._keep_alive = True
        self._must_be_empty_body = False
        writer.enable_chunking()
        writer._headers_buf = _FORM % (self._lines, rfc822_formatted_time().encode())
        if self._at_once:
            writer.send_headers()
        return writer
