"""Error answers for requests that never reached a dialect's exchange, in the dialect's envelope."""

from __future__ import annotations

from aiohttp import web

from gateway.ingress.base import IngressCodec
from gateway.ingress.errors import ClientError


def error_response(exc: ClientError, codec: IngressCodec | None = None) -> web.Response:
    """`codec`: whose error envelope (None: OpenAI's)."""
    status, body = codec.error_body(exc) if codec is not None else (exc.status, exc.to_json())
    return web.Response(status=status, body=body, headers=exc.headers, content_type="application/json")
