"""Error answers shared by every handler."""

from __future__ import annotations

import math

from aiohttp import web

from gateway.ingress.errors import ClientError
from gateway.routing.engine import AllTargetsFailed
from gateway.transcript.events import ErrorCategory, UpstreamError

# upstream failure category -> the status the client sees; the rest (auth, permission, not found,
# server, connection, protocol) are the gateway's upstream failing it: 502
_STATUS = {
    ErrorCategory.INVALID_REQUEST: 400,
    ErrorCategory.CONTINUITY: 400,
    ErrorCategory.PAIRING: 400,
    ErrorCategory.TOO_LARGE: 413,
    ErrorCategory.RATE_LIMIT: 429,
    ErrorCategory.QUOTA: 429,
    ErrorCategory.OVERLOADED: 503,
    ErrorCategory.TIMEOUT: 504,
}


# a provider refusing the gateway's own key: its message is about that key (OpenAI's quotes part of
# it) and means nothing to the client, whose credentials never reach a provider
_CREDENTIAL_CATEGORIES = frozenset({ErrorCategory.AUTH, ErrorCategory.PERMISSION})


def _credentials_refused(provider: str, error: UpstreamError) -> str:
    status = f" ({error.status})" if error.status else ""
    if error.category is ErrorCategory.AUTH:
        return (
            f"provider {provider!r} rejected the gateway's API key{status}: the gateway operator must"
            " check that provider's key"
        )
    return (
        f"provider {provider!r} refused the gateway's API key access{status}: the gateway operator must"
        " check that key's permissions"
    )


def error_response(exc: ClientError) -> web.Response:
    return web.Response(
        status=exc.status, body=exc.to_json(), headers=exc.headers, content_type="application/json"
    )


def client_error_for(failed: AllTargetsFailed) -> ClientError:
    """The client's view of a request no target served: a real status (429/503 carry Retry-After),
    the upstream's message, and which targets were tried (also in X-Gateway-Attempts)."""
    final = failed.final
    headers = {"X-Gateway-Attempts": str(len(failed.attempts))}
    message = final.message
    if failed.attempts:
        provider = failed.attempts[-1].provider
        headers["X-Gateway-Provider"] = provider
        if final.category in _CREDENTIAL_CATEGORIES and final.type != "missing_api_key":
            message = _credentials_refused(provider, final)
        tried = ", ".join(f"{a.provider}: {a.outcome}" for a in failed.attempts)
        message = f"{message} (attempts: {tried})"
    if final.type == "missing_api_key":
        return ClientError(500, message, type="server_error", code="missing_api_key", headers=headers)
    status = _STATUS.get(final.category, 502)
    if final.retry_after is not None and status in (429, 503):
        headers["Retry-After"] = str(max(1, math.ceil(final.retry_after)))
    kind = "invalid_request_error" if status in (400, 413) else "upstream_error"
    return ClientError(status, message, type=kind, code=final.code or final.category.value, headers=headers)
