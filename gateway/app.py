"""The aiohttp application factory: routes, middlewares, and the lifetime of shared resources."""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import aiohttp
from aiohttp import web

from gateway.config import GatewayConfig, resolve_auth_tokens
from gateway.handlers.chat_completions import chat_completions
from gateway.handlers.common import error_response
from gateway.ingress.errors import ClientError
from gateway.metrics import Metrics
from gateway.routing.engine import Engine
from gateway.state import GatewayState

log = logging.getLogger("gateway")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_OPEN_PATHS = frozenset({"/healthz", "/readyz"})


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error a client sees has the OpenAI error body, including aiohttp's own 404/405/413."""
    try:
        return await handler(request)
    except ClientError as exc:
        return error_response(exc)
    except web.HTTPRequestEntityTooLarge as exc:
        return error_response(
            ClientError(413, f"request body larger than {exc.max_size} bytes", code="body_too_large")
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
        return error_response(ClientError(exc.status, exc.reason, type=kind, headers=dict(exc.headers)))
    except Exception:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(ClientError(500, "internal gateway error", type="server_error"))


def auth_middleware(tokens: tuple[bytes, ...]) -> Callable:
    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in _OPEN_PATHS:
            given = request.headers.get("Authorization", "")
            scheme, _, value = given.partition(" ")
            candidate = value.strip().encode() if scheme.lower() == "bearer" else b""
            # compare against every token, always, so timing says nothing about which one matched
            ok = False
            for token in tokens:
                ok |= hmac.compare_digest(candidate, token)
            if not ok:
                raise ClientError(
                    401,
                    "missing or invalid bearer token",
                    type="authentication_error",
                    code="invalid_api_key",
                )
        return await handler(request)

    return check


async def list_models(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "gateway"} for name in state.config.models
    ]
    return web.json_response({"object": "list", "data": data})


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ready"})


async def metrics_endpoint(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    return web.Response(
        body=state.metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
    )


def create_app(
    config: GatewayConfig,
    env: Mapping[str, str] | None = None,
    metrics: Metrics | None = None,
) -> web.Application:
    tokens = tuple(t.encode() for t in resolve_auth_tokens(config, env)) if config.auth else ()
    middlewares = [errors_middleware]
    if tokens:
        middlewares.append(auth_middleware(tokens))
    app = web.Application(client_max_size=config.server.max_body_bytes, middlewares=middlewares)
    metrics = metrics or Metrics()
    metrics.set_targets((name, t.provider) for name, group in config.models.items() for t in group.targets)

    async def resources(app: web.Application) -> AsyncIterator[None]:
        # upstream URLs come only from config: no proxies from the environment, no cookies kept
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
        )
        app[GatewayState.KEY] = GatewayState(config, metrics, Engine(config, session, env=env), tokens)
        try:
            yield
        finally:
            await session.close()

    app.cleanup_ctx.append(resources)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_endpoint)
    return app
