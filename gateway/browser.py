"""What keeps a web page in the user's browser from using the gateway (and the provider keys
behind it). A browser sends some cross-origin requests without asking first ("simple" requests:
`text/plain` or form bodies, no custom headers); CORS only hides their answers, the provider call
would still be made. And a page whose name re-resolves to 127.0.0.1 (DNS rebinding) is
same-origin with the gateway as far as the browser knows, so it may read every answer. Hence,
before any body is read:

- `Host` must name this gateway: a loopback name, any IP address (a rebinding page always has a
  DNS name in its Host), or a name in `[server] allowed_hosts`. Else 403 `host_not_allowed` (as
  Vite's `allowedHosts` and Ollama do: 421 Misdirected Request is for a server that is not the
  origin of a TLS name; this is a refusal).
- A request with an `Origin` is served only when that origin is the gateway's own (its pages,
  same-origin) or listed in `[server] allowed_origins`. Else 403 `origin_not_allowed`. Listed
  origins get CORS: a preflight is answered and `Access-Control-Allow-Origin` echoes the origin.
- A POST body must be `application/json`: no simple request carries that type, so a page can
  only send one after a preflight, which an origin not listed does not pass. Else 415.

The same decisions are made for every dialect: a refusal is a ClientError answered in the path's
envelope by the edge (gateway/app.py).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web

from gateway.http_errors import UNROUTED
from gateway.ingress.errors import ClientError, echo

_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?\.?")
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
JSON_MEDIA_TYPE = "application/json"
# an allowed cross-origin request's origin, for its response's CORS headers; None for every other
# request the guard admitted (set either way: a key looked up absent costs a KeyError raised and
# caught, on every answer)
CORS_ORIGIN: web.RequestKey[str | None] = web.RequestKey("gateway_cors_origin")
_PREFLIGHT_METHODS = "GET, POST, OPTIONS"
_PREFLIGHT_MAX_AGE = "600"
# what a listed origin's page may read of an answer besides the CORS-safelisted headers
_EXPOSED_HEADERS = "X-Request-Id, X-Session-Id, Retry-After, X-Gateway-Provider, X-Gateway-Attempts"


@dataclass(frozen=True, slots=True)
class BrowserPolicy:
    """`hosts`: exact names; `domains`: ".example.com" entries (the domain and its subdomains);
    `any_host`: "*" was listed. `origins`: exact origins, lowercased."""

    hosts: frozenset[str] = frozenset()
    domains: tuple[str, ...] = ()
    any_host: bool = False
    origins: frozenset[str] = frozenset()
    # Host header value -> (hostname, port), for values allowed: a client sends the same few on
    # every request (bounded: past `_HOSTS_KEPT` values, a value is judged afresh)
    allowed_hosts: dict[str, tuple[str, int | None]] = field(default_factory=dict, compare=False)

    @classmethod
    def from_lists(cls, hosts: Iterable[str], origins: Iterable[str], bind_host: str = "") -> BrowserPolicy:
        """`bind_host`: the configured listen address, a name the operator chose, also served."""
        names = {h.lower() for h in hosts}
        if bind_host and bind_host not in ("0.0.0.0", "::"):
            names.add(bind_host.lower())
        return cls(
            frozenset(n for n in names if not n.startswith(".") and n != "*"),
            tuple(n for n in names if n.startswith(".")),
            "*" in names,
            frozenset(o.lower().rstrip("/") for o in origins),
        )

    def host_allowed(self, hostname: str) -> bool:
        if self.any_host or hostname in LOOPBACK_NAMES or hostname in self.hosts:
            return True
        if _is_ip(hostname):
            return True
        return any(hostname == d[1:] or hostname.endswith(d) for d in self.domains)


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def split_host(value: str) -> tuple[str, int | None] | None:
    """(hostname, port) of a Host header value (`[::1]:8787`, `localhost`), None if malformed:
    strictly `name[:port]` or `[ipv6][:port]`, so that no lenient parse finds a loopback name
    inside something else."""
    value = value.lower()
    if value.startswith("["):
        address, bracket, port = value[1:].partition("]")
        if not bracket or not _is_ip(address) or (port and not port.startswith(":")):
            return None
        name, port = address, port[1:]
    else:
        name, _, port = value.partition(":")
        if not _HOST_NAME.fullmatch(name):
            return None
    if not port:
        return name, None
    if not port.isdigit() or len(port) > 5 or int(port) > 65535:
        return None
    return name, int(port)


def _same_origin(origin: str, host: tuple[str, int | None]) -> bool:
    """Whether `origin` is the gateway itself as the request reached it (its own pages)."""
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or parts.hostname is None:
        return False
    default = 80 if parts.scheme == "http" else 443
    hostname, host_port = host
    # a Host without a port is the scheme's default port, whichever scheme a proxy in front used
    return parts.hostname == hostname and (port or default) == (host_port or default)


def _forbidden(message: str, code: str) -> ClientError:
    return ClientError(403, message, type="permission_error", code=code)


def check_host(request: web.BaseRequest, policy: BrowserPolicy) -> tuple[str, int | None]:
    raw = request.headers.get("Host", "")
    known = policy.allowed_hosts.get(raw)
    if known is not None:
        return known
    host = split_host(raw)
    if host is not None and policy.host_allowed(host[0]):
        if len(policy.allowed_hosts) < _HOSTS_KEPT:
            policy.allowed_hosts[raw] = host
        return host
    raise _forbidden(
        f"Host {echo(raw)!r} is not served by this gateway: it answers to loopback names, IP"
        " addresses and the names in [server] allowed_hosts",
        "host_not_allowed",
    )


_HOSTS_KEPT = 256


def check_origin(request: web.BaseRequest, policy: BrowserPolicy, host: tuple[str, int | None]) -> str | None:
    """The request's cross-origin origin when it is allowed (its answers get CORS headers), None
    for a request without one or from the gateway's own pages; refused otherwise."""
    origin = request.headers.get("Origin")
    if origin is None:
        return None
    normalized = origin.strip().lower().rstrip("/")
    if normalized in policy.origins:
        return origin.strip()
    if _same_origin(normalized, host):
        return None
    raise _forbidden(
        f"Origin {echo(origin)!r} may not use this gateway: list it in [server] allowed_origins",
        "origin_not_allowed",
    )


def preflight(request: web.BaseRequest, origin: str) -> web.Response:
    """The answer to a listed origin's CORS preflight (any route: the route's own answer says
    whether the method exists)."""
    requested = request.headers.get("Access-Control-Request-Headers", "")
    headers = {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": _PREFLIGHT_METHODS,
        "Access-Control-Max-Age": _PREFLIGHT_MAX_AGE,
        "Vary": "Origin",
    }
    if requested:
        headers["Access-Control-Allow-Headers"] = requested
    return web.Response(status=204, headers=headers)


def is_preflight(request: web.BaseRequest) -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


def check_json_body(request: web.BaseRequest) -> None:
    """A POST to a route that exists carries a JSON body (415 otherwise)."""
    if request.method != "POST":
        return
    match = request.match_info
    # no route: the app's catch-all (gateway/app.py), or aiohttp's router without it
    if match.route.name == UNROUTED or match.http_exception is not None:
        return
    sent = request.headers.get("Content-Type")
    # what clients send, compared as it is; anything else as aiohttp parses the media type, params
    # aside (its parse is most of this check's cost, on every request)
    if sent == JSON_MEDIA_TYPE or request.content_type == JSON_MEDIA_TYPE:
        return
    got = f"got {echo(sent)!r}" if sent else "none was sent"
    raise ClientError(
        415,
        f"the request body must be JSON with Content-Type: application/json ({got})",
        code="unsupported_media_type",
    )


def cors_headers(origin: str) -> dict[str, str]:
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": _EXPOSED_HEADERS,
        "Vary": "Origin",
    }
