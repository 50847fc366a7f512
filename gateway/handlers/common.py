"""Error answers for requests that never reached a dialect's codec (the OpenAI error body)."""

from __future__ import annotations

from aiohttp import web

from gateway.ingress.errors import ClientError


def error_response(exc: ClientError) -> web.Response:
    return web.Response(
        status=exc.status, body=exc.to_json(), headers=exc.headers, content_type="application/json"
    )
