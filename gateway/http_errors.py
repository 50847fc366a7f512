"""Errors answered outside a dialect's handler - unknown paths, wrong methods, unparsable requests,
refused credentials, oversized or late bodies, the connection cap, shutdown - in the envelope of
the client's dialect, chosen by request path (`GatewayState.observe_refusal` accounts for them
under the path's `ingress` label).

Every such error goes through `error_response`. A new ingress dialect adds its path prefix, its
`ingress` label and its error renderer to `DIALECTS`; a path outside every prefix answers in the
OpenAI envelope and is counted under the `ingress` label `unrouted`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

from gateway.ingress.errors import ClientError, anthropic_error_body, echo, openai_error_body
from gateway.ingress.gemini.errors import google_error_body

ErrorBody = Callable[[ClientError], bytes]
# the `ingress` label of a request whose path belongs to no dialect (404s, /v1/models, /metrics...)
UNROUTED = "unrouted"
COUNT_TOKENS_INGRESS = "anthropic_count_tokens"  # /v1/messages/count_tokens
_MAX_ECHOED_PATH = 200  # a path quoted in a message is the client's input: bounded


@dataclass(frozen=True, slots=True)
class Dialect:
    # the path itself, or a parent of its paths ("/v1/messages" covers ".../count_tokens"); one
    # ending in "/" covers only paths below it ("/v1/models/" is Gemini's, "/v1/models" OpenAI's)
    prefix: str
    ingress: str  # the metrics label value
    error_body: ErrorBody


DIALECTS: tuple[Dialect, ...] = (
    Dialect("/v1/chat/completions", "chat_completions", openai_error_body),
    # before its parent: count_tokens requests are not Messages requests in the metrics
    Dialect("/v1/messages/count_tokens", COUNT_TOKENS_INGRESS, anthropic_error_body),
    Dialect("/v1/messages", "anthropic_messages", anthropic_error_body),
    Dialect("/v1/responses", "responses", openai_error_body),
    Dialect("/v1beta", "gemini", google_error_body),
    Dialect("/v1/models/", "gemini", google_error_body),
)


def dialect_for(path: str) -> Dialect | None:
    for dialect in DIALECTS:
        prefix = dialect.prefix
        if path == prefix or (path.startswith(prefix) and (prefix[-1] == "/" or path[len(prefix)] == "/")):
            return dialect
    return None


def ingress_label(path: str) -> str:
    dialect = dialect_for(path)
    return UNROUTED if dialect is None else dialect.ingress


def error_response(path: str, exc: ClientError) -> web.Response:
    """The one rendering of an error raised outside a handler: the envelope of the dialect that
    owns `path` (OpenAI's when none does), with the error's own headers."""
    dialect = dialect_for(path)
    body = (openai_error_body if dialect is None else dialect.error_body)(exc)
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
