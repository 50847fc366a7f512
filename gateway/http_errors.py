"""Errors answered outside a dialect's handler - unknown paths, wrong methods, unparsable requests,
refused credentials, oversized or late bodies, the connection cap, shutdown - in the envelope of
the client's dialect, chosen by request path (`GatewayState.observe_refusal` accounts for them
under the path's `ingress` label).

Every such error goes through `error_response`. The dialects and the paths each owns are their
records (gateway/ingress/dialects.py); a path no dialect owns answers in the OpenAI envelope and is
counted under the `ingress` label `unrouted`.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web

from gateway.ingress.base import Dialect
from gateway.ingress.dialects import DIALECTS
from gateway.ingress.errors import ClientError, echo, openai_error_body

# the `ingress` label of a request whose path belongs to no dialect (404s, /v1/models, /metrics...)
UNROUTED = "unrouted"
_MAX_ECHOED_PATH = 200  # a path quoted in a message is the client's input: bounded


def dialect_for(path: str) -> Dialect | None:
    for dialect in DIALECTS:
        if dialect.owns(path):
            return dialect
    return None


def ingress_label(path: str) -> str:
    """The `ingress` label of a request refused before its handler: its dialect's, or its
    counting route's (gateway/handlers/count_tokens.py counts under that label too)."""
    dialect = dialect_for(path)
    if dialect is None:
        return UNROUTED
    count = dialect.count
    if count is not None and count.covers(path):
        return count.ingress
    return dialect.ingress


def error_response(path: str, exc: ClientError) -> web.Response:
    """The one rendering of an error raised outside a handler: the envelope of the dialect that
    owns `path` (OpenAI's when none does), with the error's own status and headers."""
    dialect = dialect_for(path)
    body = openai_error_body(exc) if dialect is None else dialect.error(exc)[1]
    return web.Response(status=exc.status, body=body, headers=exc.headers, content_type="application/json")


def echo_path(path: str) -> str:
    return echo(path, _MAX_ECHOED_PATH)


def not_found(method: str, path: str, endpoints: Sequence[str] = ()) -> ClientError:
    """`endpoints`: what the gateway does serve, so a client pointed at the wrong base URL (a
    missing `/v1`, another API's path) can see it from the error alone."""
    served = f" (endpoints: {', '.join(endpoints)})" if endpoints else ""
    return ClientError(
        404,
        f"no such endpoint: {method} {echo_path(path)}{served}",
        type="not_found_error",
        code="unknown_url",
    )


def method_not_allowed(method: str, path: str, allowed: str) -> ClientError:
    return ClientError(
        405,
        f"method {method} is not allowed on {echo_path(path)} (allowed: {allowed})",
        code="method_not_allowed",
        headers={"Allow": allowed},
    )
