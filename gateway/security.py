"""Security defaults at the HTTP edges.

- Client authentication: tokens from [auth] (`Authorization: Bearer`, `x-api-key`,
  `x-goog-api-key` or `?key=`), checked in constant time. The token a request was admitted with is
  its tenant (`Tenants`), decided here once for every dialect.
- `/metrics` is served to loopback clients when no tokens are configured; with tokens it takes one
  from every client (unless `[auth] metrics_from_loopback_without_token`).
- Browsers: Host, Origin and the JSON media type are checked before anything else
  (gateway/browser.py).
- The request body limit: 413 from the Content-Length alone when it is too large, otherwise while
  reading (aiohttp counts the decompressed bytes, so a small gzip bomb is refused too); the body
  must arrive within a time limit (408), and one that does not decode is a 400.
- A refused request whose body is left unread is answered, then drained for a bounded time and
  number of bytes, then its connection closed (`send_and_close`).
- Header allow-lists both ways: an upstream request carries only the headers a provider call
  needs (the adapters build them from scratch; nothing of the client's is copied; the list is
  gateway/headers.py's, checked where upstream.py sends the call), and a client response only the
  gateway's own headers (nothing of the provider's).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from gateway.browser import (
    CORS_ORIGIN,
    BrowserPolicy,
    check_host,
    check_json_body,
    check_origin,
    cors_headers,
    is_preflight,
    preflight,
)
from gateway.headers import AllowList, drop_header
from gateway.ingress.errors import ClientError
from gateway.state import TENANT

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# liveness and readiness (probes carry no token), and the static example UI page (its API calls
# carry the token)
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/ui/ndjson.html"})
METRICS_PATH = "/metrics"
INSPECTOR_PATH = "/inspector"
INSPECTOR_PREFIX = "/inspector/"
# A request that passed through a proxy is not a local client, whatever address it came from.
_FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")

# What a client response may carry: framing, the gateway's own headers, nothing from upstream.
CLIENT_RESPONSE_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "date",
        "server",
        "cache-control",
        "content-security-policy",  # the example UI page
        "retry-after",
        "allow",
        "www-authenticate",
        "x-session-id",
        "x-request-id",
        # CORS, for the origins in [server] allowed_origins only (gateway/browser.py)
        "access-control-allow-origin",
        "access-control-allow-methods",
        "access-control-allow-headers",
        "access-control-expose-headers",
        "access-control-max-age",
        "vary",
    }
)
GATEWAY_HEADER_PREFIX = "x-gateway-"
SERVER_HEADER = "llm-transcript-gateway"  # instead of aiohttp's "Python/x aiohttp/y" banner


class BearerTokens:
    """The accepted client tokens, kept only as SHA-256 digests. A candidate is hashed and compared
    with every digest using `hmac.compare_digest`: equal-length inputs and no early exit, so the
    time taken says nothing about any token's length or content, or which one matched."""

    __slots__ = ("_digests",)

    def __init__(self, tokens: Iterable[str]) -> None:
        self._digests = tuple(hashlib.sha256(t.encode()).digest() for t in tokens)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def accepts(self, authorization: str) -> bool:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer":
            value = ""
        return self.accepts_key(value)

    def accepts_key(self, value: str) -> bool:
        """A bare token, as the Anthropic SDKs and Claude Code send it in `x-api-key`."""
        value = value.strip()
        candidate = hashlib.sha256(value.encode()).digest()
        ok = False
        for digest in self._digests:
            ok |= hmac.compare_digest(candidate, digest)
        return ok and bool(value)


def is_loopback_address(address: str | None) -> bool:
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def is_local_client(request: web.BaseRequest) -> bool:
    """The peer is on this host and no proxy stood in between."""
    headers = request.headers
    if any(name in headers for name in _FORWARDING_HEADERS):
        return False
    return is_loopback_address(request.remote)


def _unauthorized() -> ClientError:
    return ClientError(
        401,
        "missing or invalid bearer token",
        type="authentication_error",
        code="invalid_api_key",
        headers={"WWW-Authenticate": 'Bearer realm="gateway"'},
    )


def presented_credentials(request: web.BaseRequest) -> tuple[str, ...]:
    """Every token the client presented, wherever its SDK puts it: `Authorization: Bearer`
    (OpenAI SDKs, ANTHROPIC_AUTH_TOKEN), `x-api-key` (Anthropic SDKs, Claude Code),
    `x-goog-api-key` and the `key` query parameter (Gemini SDKs and CLI). None is ever forwarded."""
    headers = request.headers
    scheme, _, bearer = headers.get("Authorization", "").partition(" ")
    candidates = (
        bearer if scheme.lower() == "bearer" else "",
        headers.get("x-api-key", ""),
        headers.get("x-goog-api-key", ""),
        request.query.get("key", ""),
    )
    return tuple(c for c in (c.strip() for c in candidates) if c)


def check_access(
    request: web.BaseRequest, tokens: BearerTokens, metrics_loopback_open: bool = False
) -> str | None:
    """The credential a request was admitted with (None when no tokens are configured or the path
    is open), or the ClientError it gets when it may not reach its handler. `/metrics` takes a
    token like every route when tokens are configured (a local browser page or process is not
    trusted for being local), unless `metrics_loopback_open` serves it to loopback clients."""
    path = request.path
    if path in OPEN_PATHS:
        return None
    if path == INSPECTOR_PATH or path.startswith(INSPECTOR_PREFIX):
        return _check_inspector_access(request, tokens)
    if path == METRICS_PATH:
        if (not tokens or metrics_loopback_open) and is_local_client(request):
            return None
        if not tokens:
            raise ClientError(
                403,
                "/metrics is served to loopback clients only; configure [auth] tokens to scrape it"
                " from elsewhere",
                type="permission_error",
                code="forbidden",
            )
    elif not tokens:
        return None
    for credential in presented_credentials(request):
        if tokens.accepts_key(credential):
            return credential
    raise _unauthorized()


class Tenants:
    """The tenant of a request is the credential it was admitted with, whichever header carried
    it: an HMAC of it under a server secret, so that store keys and memo scopes name no token
    (a bare hash of a token found in a store dump could be checked against guesses offline).
    Without configured tokens every client is the one tenant ""."""

    __slots__ = ("_key", "_known")

    def __init__(self, secret: bytes) -> None:
        # domain-separated from the same secret's other use (sealing continuity blobs)
        self._key = hmac.new(secret, b"gateway tenant key", hashlib.sha256).digest()
        # the tenant of each credential seen, keyed by the credential's SHA-256 (as BearerTokens
        # keeps them: no token is held here): one plain hash per request instead of an HMAC
        self._known: dict[bytes, str] = {}

    def of(self, credential: str | None) -> str:
        if not credential:
            return ""
        raw = credential.encode()
        digest = hashlib.sha256(raw).digest()
        tenant = self._known.get(digest)
        if tenant is None:
            tenant = hmac.new(self._key, raw, hashlib.sha256).hexdigest()[:32]
            if len(self._known) < _TENANTS_KEPT:  # admitted credentials: the configured tokens
                self._known[digest] = tenant
        return tenant


_TENANTS_KEPT = 4096


def _check_inspector_access(request: web.BaseRequest, tokens: BearerTokens) -> str | None:
    """The inspector shows what clients sent: without [auth] to loopback clients only, with it to
    a client token (Bearer, x-api-key, or HTTP Basic's password, which a browser asks for once and
    then sends on the page's own calls), which sees only its own requests: the token admitted is
    the viewer's tenant, as for every other route."""
    if not tokens:
        if is_local_client(request):
            return None
        raise ClientError(
            403,
            "the inspector is served to loopback clients only; configure [auth] tokens to use it from"
            " elsewhere",
            type="permission_error",
            code="forbidden",
        )
    headers = request.headers
    authorization = headers.get("Authorization", "")
    scheme, _, value = authorization.partition(" ")
    offered = (basic_password(value),) if scheme.lower() == "basic" else presented_credentials(request)
    for credential in offered:
        if tokens.accepts_key(credential):
            return credential
    error = _unauthorized()
    error.headers["WWW-Authenticate"] = 'Basic realm="gateway inspector", charset="UTF-8"'
    raise error


def basic_password(value: str) -> str:
    """The password of an HTTP Basic credential ("" when it does not decode)."""
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""
    return decoded.partition(":")[2]


def body_too_large(limit: int) -> ClientError:
    return ClientError(413, f"request body larger than {limit} bytes", code="body_too_large")


@dataclass(frozen=True, slots=True)
class BodyLimits:
    """`max_bytes`: the largest body (decompressed). `timeout`: seconds for the whole body to
    arrive once the head has. A refused body left unread is then drained for at most
    `linger_seconds` and `linger_bytes` before the connection closes."""

    max_bytes: int
    timeout: float = 60.0
    linger_seconds: float = 5.0
    linger_bytes: int = 64 * 1024 * 1024


async def read_body_within(request: web.Request, limits: BodyLimits) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed the limit: from the
    Content-Length before reading anything, else while reading (decompressed bytes count); with
    408 when it does not arrive in time; with 400 when it does not decode (a broken gzip stream,
    a malformed chunk). The request keeps the bytes, so a handler's own `request.read()` returns
    them without reading again (`_read`)."""
    length = request.content_length
    if length is not None and length > limits.max_bytes:
        raise body_too_large(limits.max_bytes)
    try:
        if request.content.is_eof():  # the whole body is in already (most requests): no wait to bound
            return await _read(request, limits.max_bytes)
        async with asyncio.timeout(limits.timeout):
            return await _read(request, limits.max_bytes)
    except web.HTTPRequestEntityTooLarge:
        raise body_too_large(limits.max_bytes) from None
    except TimeoutError:
        raise ClientError(
            408, f"request body not received within {limits.timeout:g} seconds", code="body_timeout"
        ) from None
    except web.RequestPayloadError as exc:
        cause = exc.__cause__
        detail = f" ({cause.message.strip()[:200]})" if isinstance(cause, HttpProcessingError) else ""
        encoding = request.headers.get("Content-Encoding")
        what = f"does not decode as Content-Encoding {encoding}" if encoding else "is malformed"
        raise ClientError(400, f"request body {what}{detail}", code="invalid_body") from None


async def _read(request: web.Request, limit: int) -> bytes:
    """aiohttp's `request.read()` (the body kept on the request, so that the handler's own read
    returns it; refused past `limit`, the app's client_max_size, as aiohttp refuses it), with
    the pieces its reads return joined once: aiohttp's grows a bytearray with each piece and then
    copies it into bytes, two more copies of the whole body (a 1 MB agent turn: ~0.1-0.2 ms, the
    first copy's fresh pages included). A body that was all in comes back from one read whole."""
    if request._read_bytes is not None:
        return request._read_bytes
    content = request.content
    content.set_read_chunk_size(limit)  # as aiohttp's read: large pieces, no pause per 64 KiB
    pieces = []
    size = 0
    while piece := await content.readany():
        size += len(piece)
        if size > limit:
            raise web.HTTPRequestEntityTooLarge(limit, size)
        pieces.append(piece)
    body = request._read_bytes = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    return body


async def send_and_close(
    request: web.Request, response: web.StreamResponse, limits: BodyLimits
) -> web.StreamResponse:
    """Send `response` to a client whose request body is left unread, then close the connection.

    Closing at once would make the kernel answer the unread bytes with a reset, which can destroy
    the response before the client reads it (a client still uploading sees ECONNRESET instead of
    the 413). So, as nginx's lingering close does: the response goes out, the write side is shut
    (the client sees the end of the answer), and the rest of the body is read and dropped - for at
    most `linger_seconds` and `linger_bytes`, so a client cannot make the gateway read without end
    (aiohttp's own lingering reads a refused body for 10 s, however many bytes that is)."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    transport = request.transport
    if transport is not None and transport.can_write_eof():
        transport.write_eof()  # sent once the answer has been flushed
    content = request.content
    drained = 0
    try:
        async with asyncio.timeout(limits.linger_seconds):
            while drained <= limits.linger_bytes and not content.at_eof():
                chunk = await content.readany()
                if not chunk:
                    break
                drained += len(chunk)
    except (TimeoutError, ConnectionError, web.RequestPayloadError):
        pass
    request.protocol.force_close()
    return response


@dataclass(frozen=True, slots=True)
class RequestGuard:
    """Before any handler runs and before the body is read: the browser checks (Host, Origin, a
    listed origin's preflight; gateway/browser.py), access control, the JSON media type, then the
    body limits (so neither a web page nor an unauthenticated client can make the gateway read a
    large body). A refusal is a ClientError for the edge (gateway/app.py) to answer and
    account for; it calls `admit`, then `read_body` when the request has a body, then the handler."""

    tokens: BearerTokens
    limits: BodyLimits
    browser: BrowserPolicy
    tenants: Tenants
    metrics_loopback_open: bool = False

    def admit(self, request: web.Request) -> web.StreamResponse | None:
        """Raises the request's refusal; returns the answer to a listed origin's preflight, else
        None (the request goes on, its tenant decided)."""
        browser = self.browser
        host = check_host(request, browser)
        origin = check_origin(request, browser, host)
        if origin is not None and is_preflight(request):
            return preflight(request, origin)
        request[CORS_ORIGIN] = origin
        request[TENANT] = self.tenants.of(check_access(request, self.tokens, self.metrics_loopback_open))
        check_json_body(request)
        return None

    async def read_body(self, request: web.Request) -> None:
        await read_body_within(request, self.limits)


async def restrict_response_headers(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """`on_response_prepare` signal: a client response carries only the gateway's own headers."""
    headers = response.headers
    for name in _CLIENT.refused(tuple(headers)):
        drop_header(headers, name, "client response")
    headers["Server"] = SERVER_HEADER
    origin = request.get(CORS_ORIGIN)
    if origin is not None:
        headers.update(cors_headers(origin))


def client_headers_refused(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names of a client response's headers (as written, in order) the allow-list refuses."""
    return _CLIENT.refused(names)


def _client_header_allowed(name: str) -> bool:
    return name in CLIENT_RESPONSE_HEADERS or name.startswith(GATEWAY_HEADER_PREFIX)


_CLIENT = AllowList(_client_header_allowed)
