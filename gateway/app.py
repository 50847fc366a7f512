"""The aiohttp application factory: routes, middlewares, and the lifetime of shared resources."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import aiohttp
from aiohttp import web

from gateway import __version__
from gateway.config import GatewayConfig, resolve_auth_tokens, resolve_continuity_secret
from gateway.continuity.recorder import Recorder
from gateway.handlers import chat_completions
from gateway.handlers.common import error_response
from gateway.ingress.errors import ClientError
from gateway.metrics import Metrics, RequestRecord
from gateway.redaction import Redactor, secrets_redactor
from gateway.routing.engine import Engine
from gateway.security import (
    BearerTokens,
    Middleware,
    body_too_large,
    request_guard,
    restrict_response_headers,
    send_and_close,
    upstream_header_allowlist,
)
from gateway.state import GatewayState
from gateway.store import open_store
from gateway.transcript.seal import Sealer

log = logging.getLogger("gateway")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_AGENT = f"llm-transcript-gateway/{__version__}"

# The client-facing API: path -> (handler, the `ingress` label of its metrics)
INGRESS_ROUTES: dict[str, tuple[Handler, str]] = {
    "/v1/chat/completions": (chat_completions.chat_completions, chat_completions.INGRESS),
}


def errors_middleware(redactor: Redactor) -> Middleware:
    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every error a client sees has the OpenAI error body, including aiohttp's own 404/405,
        and no secret: a provider that echoes a key in its error message is redacted here."""
        try:
            response = await handler(request)
        except ClientError as exc:
            response = error_response(exc)
        except web.HTTPRequestEntityTooLarge as exc:  # a body read past the guard's limit check
            response = error_response(body_too_large(exc.max_size))
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            kind = "not_found_error" if exc.status == 404 else "invalid_request_error"
            response = error_response(
                ClientError(exc.status, exc.reason, type=kind, headers=dict(exc.headers))
            )
        except Exception:
            log.exception("unhandled error on %s %s", request.method, request.path)
            response = error_response(ClientError(500, "internal gateway error", type="server_error"))
        if response.status >= 400 and type(response) is web.Response and type(response.body) is bytes:
            response.body = redactor.data(response.body)
        if response.status == 413 and not request.content.at_eof():
            return await send_and_close(request, response)  # an oversized body is left unread
        return response

    return errors


def _rejection_recorder(app: web.Application) -> Callable[[web.Request, ClientError, float], None]:
    def account(request: web.Request, exc: ClientError, started: float) -> None:
        """A request refused before its handler (401, 413) still counts and gets its access line."""
        log.debug("refused %s %s with %d: %s", request.method, request.path, exc.status, exc.message)
        route = INGRESS_ROUTES.get(request.path)
        if route is None or request.method != "POST":
            return
        state: GatewayState = app[GatewayState.KEY]
        state.observe(
            RequestRecord(
                route[1],
                request_id=uuid.uuid4().hex,
                outcome="client_error",
                status=exc.status,
                duration=time.monotonic() - started,
            )
        )

    return account


async def list_models(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "gateway"} for name in state.config.models
    ]
    return web.json_response({"object": "list", "data": data})


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    if await state.store.ping():
        return web.json_response({"status": "ready", "store": state.store.backend})
    return web.json_response({"status": "store unreachable", "store": state.store.backend}, status=503)


async def metrics_endpoint(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    return web.Response(
        body=state.metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
    )


def create_app(
    config: GatewayConfig,
    env: Mapping[str, str] | None = None,
    metrics: Metrics | None = None,
    continuity_key: bytes | None = None,
) -> web.Application:
    """`continuity_key`: the key sealing continuity data when the config names no secret (workers
    of one `gateway serve` share one, so a blob sealed by one verifies on every other)."""
    tokens = BearerTokens(resolve_auth_tokens(config, env))
    redactor = secrets_redactor(config, env)
    continuity_secret = resolve_continuity_secret(config, env) or continuity_key
    app = web.Application(client_max_size=config.server.max_body_bytes)
    app.middlewares.append(errors_middleware(redactor))
    app.middlewares.append(request_guard(tokens, config.server.max_body_bytes, _rejection_recorder(app)))
    app.on_response_prepare.append(restrict_response_headers)
    metrics = metrics or Metrics()
    metrics.bind([*config.models, *config.providers], config.providers)

    async def resources(app: web.Application) -> AsyncIterator[None]:
        # upstream URLs come only from config: no proxies from the environment, no cookies kept,
        # and only allow-listed headers leave (see gateway/security.py)
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, enable_cleanup_closed=True),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            headers={"User-Agent": USER_AGENT},
            middlewares=(upstream_header_allowlist,),
        )
        store = open_store(config.store, on_op=metrics.count_store_operation)
        recorder = Recorder(store)
        engine = Engine(config, session, env=env)
        metrics.watch_targets(engine.availability())
        refresher = asyncio.create_task(metrics.keep_targets_fresh()) if metrics.multiprocess_dir else None
        sealer = Sealer(continuity_secret)
        app[GatewayState.KEY] = GatewayState(config, metrics, engine, store, recorder, redactor, sealer)
        try:
            yield
        finally:
            if refresher is not None:
                refresher.cancel()
            await recorder.drain()  # turns answered before shutdown are still recorded
            await store.close()
            await session.close()

    app.cleanup_ctx.append(resources)
    for path, (handler, _) in INGRESS_ROUTES.items():
        app.router.add_post(path, handler)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_endpoint)
    return app
