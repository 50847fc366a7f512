"""A whole JSON answer's status line and headers written from their parts in one go, instead of
through aiohttp's `web.Response`: a CIMultiDict of the headers, the `on_response_prepare` signal
that restricts them (`restrict_response_headers`), aiohttp's header preparation and its
serialization: writing the small request's answer took 15.9 us warm that way and 8.7 this way
(bench/answer_write.py, best of 7), more at c=1, where every line of that code is cold again.

The bytes are those aiohttp writes for the same answer, hook included
(tests/security/test_whole_answer.py compares them). What this does not cover gets aiohttp's
Response as before: HTTP/1.0 or a client that asked to close (the Connection header), a browser's
CORS origin (its headers), an app with any other prepare hook or a sub-app, and a header set that
the allow-list would cut or that holds a framing header or a character that is not printable.

At c=1 every line a request runs is cold again, so a request checks as little as it can: the
app's hooks are judged once as it starts (`json_answer_for`), the CORS origin is looked up only
when an Origin header came, the values are checked by `str.isprintable`. A per-request hook check
(`request.match_info.apps`), `request.get` (a Mapping method in Python) and a regular expression
took 10-15 us each there (bench/c1_path.py with a mark around each, the marks' cost included)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping

from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http import HttpVersion11

from gateway.browser import CORS_ORIGIN
from gateway.security import SERVER_HEADER, client_headers_refused, restrict_response_headers
from gateway.state import json_response

JsonAnswer = Callable[[web.BaseRequest, Mapping[str, str], bytes], web.StreamResponse]

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_date_second = -1  # the second `_date_text` was written for
_date_text = ""


def http_date() -> str:
    """The Date header's value now, as aiohttp's Response writes it (its `rfc822_formatted_time`,
    which this is used in place of where aiohttp has none: that is no documented API), formatted
    once per second. tests/security/test_whole_answer.py compares the two."""
    global _date_second, _date_text
    now = int(time.time())
    if now != _date_second:
        year, month, day, hh, mm, ss, weekday, *_ = time.gmtime(now)
        _date_text = (
            f"{_WEEKDAYS[weekday]}, {day:02d} {_MONTHS[month]:>3} {year:4d} {hh:02d}:{mm:02d}:{ss:02d} GMT"
        )
        _date_second = now
    return _date_text


try:  # the one aiohttp's Responses use, so a whole answer's Date is theirs to the second
    from aiohttp.helpers import rfc822_formatted_time
except ImportError:  # an aiohttp that moved or dropped it
    rfc822_formatted_time = http_date

# the status line, the handler's header lines, then what aiohttp adds itself as it orders them
# (Content-Type, Content-Length, Date, Server, and Connection only when closing an HTTP/1.1
# connection), the blank line and the body
_FORM = (
    b"HTTP/1.1 200 OK\r\n%bContent-Type: application/json\r\nContent-Length: %d\r\nDate: %b\r\n"
    + f"Server: {SERVER_HEADER}\r\n".encode()
    + b"%b\r\n%b"
)
# headers aiohttp or this module write: given by the handler, they take the general path
_FRAMING = frozenset({"content-type", "content-length", "date", "server", "connection", "transfer-encoding"})
# what aiohttp refuses in a header (a line break would smuggle another): it fails the answer
_FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# a header set's names as written -> its lines with a %s per value, or None when the general path
# must judge them (a name the allow-list cuts, a framing header, a control character)
_FORMS: dict[tuple[str, ...], str | None] = {}
_MAX_SETS = 1024


def json_answer_for(app: web.Application) -> JsonAnswer:
    """How the app's whole answers are written (`GatewayState.json_answer`), decided once as it
    starts: as one block when the only prepare hook its routes run is the gateway's own header
    restriction (the one this module writes the effect of), else aiohttp's Response."""
    hooks = app.on_response_prepare
    subapps = any(isinstance(r, web.PrefixedSubAppResource) for r in app.router.resources())
    own = len(hooks) == 1 and hooks[0] is restrict_response_headers and not subapps
    return json_answer if own else json_response


def plain_request(request: web.BaseRequest) -> bool:
    """Whether a pre-built head can answer `request` (whole or streamed): HTTP/1.1 kept alive, with
    no CORS origin to echo (aiohttp's path writes the Connection and CORS headers otherwise)."""
    # without an Origin header the guard found no CORS origin (gateway/browser.py `check_origin`)
    return (
        request.version == HttpVersion11
        and request.keep_alive
        and ("Origin" not in request.headers or request.get(CORS_ORIGIN) is None)
    )


def json_answer(request: web.BaseRequest, headers: Mapping[str, str], body: bytes) -> web.StreamResponse:
    """A 200 JSON answer with the gateway's `headers`: written as one block when the request allows
    it, else aiohttp's Response. For an app whose only prepare hook is the gateway's own
    (`json_answer_for`)."""
    if plain_request(request):
        lines = header_lines(headers, _FORMS, _FRAMING)
        if lines is not None:
            return WholeJson(lines, body)
    return json_response(request, headers, body)


def header_lines(
    headers: Mapping[str, str], forms: dict[tuple[str, ...], str | None], framing: frozenset[str]
) -> bytes | None:
    """The header lines as aiohttp writes them, or None when the general path must judge them
    (`framing`: the names the caller's head writes itself; `forms`: its verdicts by header set)."""
    names = tuple(headers)
    try:
        form = forms[names]
    except KeyError:
        form = _form(names, forms, framing)
    if form is None:
        return None
    values = tuple(headers.values())
    try:
        # printable: no control character aiohttp refuses (a tab, which it takes, or an unusual
        # character takes the general path too)
        if not "".join(values).isprintable():
            return None
        return (form % values).encode("utf-8")
    except (TypeError, UnicodeEncodeError):  # a value that is no str, a lone surrogate
        return None


def _form(
    names: tuple[str, ...], forms: dict[tuple[str, ...], str | None], framing: frozenset[str]
) -> str | None:
    plain = (
        not client_headers_refused(names)
        and not any(n.lower() in framing for n in names)
        and _FORBIDDEN.search("".join(names)) is None
    )
    form = "".join([f"{n.replace('%', '%%')}: %s\r\n" for n in names]) if plain else None
    if len(forms) < _MAX_SETS:
        forms[names] = form
    return form


class WholeJson(web.StreamResponse):
    """A 200 JSON answer written whole at `prepare` (aiohttp calls `prepare` then `write_eof`):
    its head from the gateway's header lines and the fixed framing, then the body, in one write
    through the request's writer (which waits for a slow client as aiohttp's own write does)."""

    def __init__(self, lines: bytes, body: bytes) -> None:
        super().__init__()
        self._lines = lines
        self._json = body
        self._written = -1  # the bytes written, once they were
        self._closing = False

    @property
    def prepared(self) -> bool:
        return self._written >= 0

    @property
    def keep_alive(self) -> bool:
        return not self._closing

    @property
    def body_length(self) -> int:
        return max(self._written, 0)

    def force_close(self) -> None:
        super().force_close()
        self._closing = True

    async def prepare(self, request: web.BaseRequest) -> AbstractStreamWriter | None:
        if self._written >= 0:
            return None
        body = self._json
        closing = b"Connection: close\r\n" if self._closing else b""
        data = _FORM % (self._lines, len(body), rfc822_formatted_time().encode(), closing, body)
        writer = request.writer
        await writer.write_eof(data)
        self._written = len(data)
        self._json = b""
        return None

    def __repr__(self) -> str:
        return f"<WholeJson {'eof' if self._written >= 0 else 'not prepared'}>"

    async def write_eof(self, data: bytes = b"") -> None:
        if self._written < 0:
            raise RuntimeError("a whole answer is written by prepare()")
