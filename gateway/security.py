"""Security defaults at the HTTP edges.

- Client authentication: bearer tokens from [auth], checked in constant time.
- `/metrics` is served to loopback clients, and to others only with a valid token.
- The request body limit: 413 from the Content-Length alone when it is too large, otherwise while
  reading (aiohttp counts the decompressed bytes, so a small gzip bomb is refused too).
- Header allow-lists both ways: an upstream request carries only the headers a provider call
  needs (the adapters build them from scratch; nothing of the client's is copied), and a client
  response only the gateway's own headers (nothing of the provider's).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping

import aiohttp
from aiohttp import web

from gateway.ingress.errors import ClientError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]

# liveness and readiness (probes carry no token), and the static example UI page (its API calls
# carry the token)
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/ui/ndjson.html"})
METRICS_PATH = "/metrics"
# A request that passed through a proxy is not a local client, whatever address it came from.
_FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")

# What a provider call may carry. Credentials here are the gateway's own provider keys, set by the
# provider adapters; the rest is HTTP framing aiohttp adds.
UPSTREAM_REQUEST_HEADERS = frozenset(
    {
        "host",
        "content-type",
        "content-length",
        "accept",
        "accept-encoding",
        "user-agent",
        "authorization",  # Bearer <provider key>: OpenAI, Mistral, Kimi, DeepSeek
        "x-api-key",  # Anthropic
        "anthropic-version",
        "anthropic-beta",
        "x-goog-api-key",  # Gemini
    }
)
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
        candidate = hashlib.sha256(value.strip().encode()).digest()
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


def check_access(request: web.BaseRequest, tokens: BearerTokens) -> None:
    """Raise the ClientError a request gets when it may not reach its handler."""
    path = request.path
    if path in OPEN_PATHS:
        return
    if path == METRICS_PATH:
        if is_local_client(request):
            return
        if not tokens:
            raise ClientError(
                403,
                "/metrics is served to loopback clients only; configure [auth] tokens to scrape it"
                " from elsewhere",
                type="permission_error",
                code="forbidden",
            )
    elif not tokens:
        return
    if not tokens.accepts(request.headers.get("Authorization", "")):
        raise _unauthorized()


def body_too_large(limit: int) -> ClientError:
    return ClientError(413, f"request body larger than {limit} bytes", code="body_too_large")


async def read_body_within(request: web.Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed `limit`: from the
    Content-Length before reading anything, else while reading (decompressed bytes count).
    aiohttp keeps the bytes, so a handler's own `request.read()` returns them without reading
    again."""
    length = request.content_length
    if length is not None and length > limit:
        raise body_too_large(limit)
    try:
        return await request.read()  # bounded by the app's client_max_size, which is `limit`
    except web.HTTPRequestEntityTooLarge:
        raise body_too_large(limit) from None


async def send_and_close(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    """Send `response` now and close the connection without reading the rest of the request
    body. For a refused oversized body: aiohttp would otherwise read and discard it for up to its
    lingering time (10 s), spending bandwidth on bytes the gateway already refused."""
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the transport flushes the answer, then closes
    return response


def request_guard(
    tokens: BearerTokens,
    max_body_bytes: int,
    on_reject: Callable[[web.Request, ClientError, float], None],
) -> Middleware:
    """Access control, then the body limit, before any handler runs (so an unauthenticated
    client cannot make the gateway read a large body). `on_reject(request, error, started)`
    accounts for a refused request before the error goes on to the error middleware."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.monotonic()
        try:
            check_access(request, tokens)
            if request.body_exists:
                await read_body_within(request, max_body_bytes)
        except ClientError as exc:
            on_reject(request, exc, started)
            raise
        return await handler(request)

    return guard


_warned: set[str] = set()


def _drop(headers: MutableMapping[str, str], name: str, direction: str) -> None:
    # once per name and direction: a new header someone adds shows up in the log, not per request
    key = f"{direction}:{name.lower()}"
    if key not in _warned:
        _warned.add(key)
        log.warning("dropped %s header %r: not on the allow-list (gateway/security.py)", direction, name)
    del headers[name]


async def upstream_header_allowlist(
    request: aiohttp.ClientRequest,
    handler: Callable[[aiohttp.ClientRequest], Awaitable[aiohttp.ClientResponse]],
) -> aiohttp.ClientResponse:
    """aiohttp client middleware: a provider call carries only allow-listed headers."""
    headers = request.headers
    for name in dict.fromkeys(n for n in headers if n.lower() not in UPSTREAM_REQUEST_HEADERS):
        _drop(headers, name, "upstream request")
    return await handler(request)


async def restrict_response_headers(request: web.BaseRequest, response: web.StreamResponse) -> None:
    """`on_response_prepare` signal: a client response carries only the gateway's own headers."""
    headers = response.headers
    for name in dict.fromkeys(n for n in headers if not _client_header_allowed(n.lower())):
        _drop(headers, name, "client response")
    headers["Server"] = SERVER_HEADER


def _client_header_allowed(name: str) -> bool:
    return name in CLIENT_RESPONSE_HEADERS or name.startswith(GATEWAY_HEADER_PREFIX)
