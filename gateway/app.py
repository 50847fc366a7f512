"""The aiohttp application factory: routes, the edge every route's handler runs in, and the lifetime
of shared resources."""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from aiohttp import hdrs, web

from gateway import offload
from gateway.browser import BrowserPolicy
from gateway.config import (
    GatewayConfig,
    resolve_auth_tokens,
    resolve_continuity_secret,
    resolve_key_tokens,
)
from gateway.continuity.recorder import Recorder
from gateway.cost import PriceBook, preload
from gateway.exchange import REQUEST_ID_HEADER
from gateway.handlers import gemini
from gateway.handlers.count_tokens import count_tokens_handler
from gateway.handlers.ingress import ingress_handler
from gateway.handlers.inspector import PAGE as INSPECTOR_PAGE
from gateway.handlers.inspector import routes as inspector_routes
from gateway.handlers.ui import NDJSON_PAGE, page_handler
from gateway.http_errors import UNROUTED, echo_path, error_response, method_not_allowed, not_found
from gateway.ingress.base import ModelsList
from gateway.ingress.dialects import DIALECTS
from gateway.ingress.errors import ClientError
from gateway.ingress.memo import SHORT_BODY, DecodeMemo
from gateway.inspector import Inspector
from gateway.lifecycle import InFlight
from gateway.limits import KeyLimits
from gateway.metrics import Metrics
from gateway.redaction import Redactor, secrets_redactor
from gateway.routing.engine import Engine
from gateway.security import (
    BearerTokens,
    BodyLimits,
    RequestGuard,
    Tenants,
    body_too_large,
    restrict_response_headers,
    send_and_close,
)
from gateway.server import refuse_over_capacity
from gateway.state import GatewayState
from gateway.store import open_store
from gateway.stream_head import stream_answer_for
from gateway.tracing import Tracing
from gateway.transcript.seal import Sealer
from gateway.upstream import client_session
from gateway.whole_answer import json_answer_for

log = logging.getLogger("gateway")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
IN_FLIGHT = web.AppKey("in_flight", InFlight)  # serve.py drains it on shutdown


def edge(redactor: Redactor, guard: RequestGuard, in_flight: InFlight) -> Callable[[Handler], Handler]:
    """What every route's handler is wrapped in (`create_app`): every layer a request passes before
    its handler, in the handler's own coroutine, outermost first: the error envelope, the request's
    in-flight scope (gateway/lifecycle.py), the connection cap (gateway/server.py), the guard
    (gateway/security.py). Not an aiohttp middleware: aiohttp runs an app with one through two more
    coroutines a request (the middleware and its own that sets `current_app`), each resumed at
    every suspension of the request; a request no route takes gets the catch-all `unrouted`."""
    limits = guard.limits

    def around(handler: Handler) -> Handler:
        async def edged(request: web.Request) -> web.StreamResponse:
            """Every error a client sees is in its dialect's envelope, including the 404/405 of a
            request no route takes, and holds no secret: a provider that echoes a key in its error
            message is redacted here. A request refused before its handler (ClientError,
            HTTPException) is accounted for here."""
            started = time.monotonic()
            try:
                entry = in_flight.enter(request)
                try:
                    refuse_over_capacity(request)
                    response = guard.admit(request)
                    if response is None:
                        if request.body_exists:
                            await guard.read_body(request)
                        response = await handler(request)
                except asyncio.CancelledError:
                    if not entry.ended_it():
                        raise  # the client went away, or the task was cancelled from elsewhere
                    response = await in_flight.last_answer(request, entry)
                finally:
                    in_flight.leave(request)
            except ClientError as exc:
                response = _refused(request, exc, started)
            except web.HTTPRequestEntityTooLarge as exc:  # a body read past the guard's limit check
                response = _refused(request, body_too_large(exc.max_size), started)
            except web.HTTPException as exc:
                if exc.status < 400:
                    raise
                response = _refused(request, _client_error(request, exc), started)
            except Exception:
                log.exception("unhandled error on %s %s", request.method, request.path)
                response = error_response(
                    request.path, ClientError(500, "internal gateway error", type="server_error")
                )
                response.headers[REQUEST_ID_HEADER] = uuid.uuid4().hex
            if response.status >= 400 and type(response) is web.Response and type(response.body) is bytes:
                response.body = redactor.data(response.body)
            if not response.prepared and not request.content.at_eof():
                # a refused or unread body: answer, drain a bounded amount, close
                return await send_and_close(request, response, limits)
            return response

        return functools.update_wrapper(edged, handler)

    return around


async def unrouted(request: web.Request) -> web.StreamResponse:
    """The catch-all route, registered last: what aiohttp's router answers a request no route
    takes (405 naming the methods of the routes its path matches, else 404), raised inside the
    edge like any handler's refusal."""
    allowed: set[str] = set()
    own = request.match_info.route.resource
    for resource in request.app.router.resources():
        if resource is not own:
            allowed |= (await resource.resolve(request))[1]
    if allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    raise web.HTTPNotFound()


def _refused(request: web.Request, exc: ClientError, started: float) -> web.Response:
    state: GatewayState | None = request.app.get(GatewayState.KEY)
    request_id = exc.headers.get(REQUEST_ID_HEADER) or uuid.uuid4().hex
    if state is not None:  # None only while starting up or shutting down
        state.observe_refusal(request.path, exc, started, request_id)
    log.debug("refused %s %s with %d: %s", request.method, request.path, exc.status, exc.message)
    response = error_response(request.path, exc)
    response.headers[REQUEST_ID_HEADER] = request_id
    if exc.status == 503:  # the gateway turning clients away (connection cap): not on this connection
        response.force_close()
    return response


def _client_error(request: web.Request, exc: web.HTTPException) -> ClientError:
    """aiohttp's routing errors in the gateway's words (its exception headers carry a
    Content-Type of their own: only `Allow` is kept)."""
    if exc.status == 404:
        log.info("no such endpoint: %s %s", request.method, echo_path(request.path))
        return not_found(request.method, request.path, _endpoints(request.app))
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return method_not_allowed(request.method, request.path, ", ".join(sorted(exc.allowed_methods)))
    kind = "invalid_request_error" if exc.status < 500 else "server_error"
    return ClientError(exc.status, exc.reason, type=kind)


def models_handler(lists: Sequence[ModelsList]) -> Handler:
    """`GET` of a models-list path: the shape of the first dialect whose `selects` takes the
    request's headers, else the path's default shape."""
    selective = [m for m in lists if m.selects is not None]
    default = next((m for m in lists if m.selects is None), lists[0])

    async def list_models(request: web.Request) -> web.Response:
        state: GatewayState = request.app[GatewayState.KEY]
        headers, query = request.headers, request.query
        shape = next((m for m in selective if m.selects is not None and m.selects(headers, query)), default)
        return web.json_response(shape.render(list(state.config.models)))

    return list_models


def _endpoints(app: web.Application) -> list[str]:
    """The API routes this gateway serves, as `METHOD /path` (the pages and probes left out)."""
    return sorted(
        {
            f"{route.method} {route.resource.canonical}"
            for route in app.router.routes()
            if route.resource is not None
            and route.method not in ("HEAD", "OPTIONS")
            and route.resource.canonical.startswith("/v1")
        }
    )


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
    key_tokens = resolve_key_tokens(config, env)
    # a named key's token is a client token too: with keys configured, clients must present one
    tokens = BearerTokens([*resolve_auth_tokens(config, env), *key_tokens])
    redactor = secrets_redactor(config, env)
    # without a configured secret or one shared by the workers: valid for this process only
    continuity_secret = resolve_continuity_secret(config, env) or continuity_key or secrets.token_bytes(32)
    server = config.server
    limits = BodyLimits(
        server.max_body_bytes, server.body_timeout_seconds, server.linger_seconds, server.linger_max_bytes
    )
    in_flight = InFlight()
    app = web.Application(client_max_size=server.max_body_bytes)
    app[IN_FLIGHT] = in_flight
    browser = BrowserPolicy.from_lists(server.allowed_hosts, server.allowed_origins, server.host)
    metrics_open = config.auth is not None and config.auth.metrics_from_loopback_without_token
    tenants = Tenants(continuity_secret)
    guard = RequestGuard(tokens, limits, browser, tenants, metrics_open)
    app.on_response_prepare.append(restrict_response_headers)
    metrics = metrics or Metrics()
    metrics.bind([*config.models, *config.providers], config.providers)
    metrics.bind_keys(config.keys)

    async def resources(app: web.Application) -> AsyncIterator[None]:
        offload.start()  # the thread large requests are worked on in (gateway/offload.py)
        session = client_session()  # upstream URLs, cookies and headers: see there
        store = open_store(config.store, on_op=metrics.count_store_operation)
        recorder = Recorder(store)
        engine = Engine(config, session, env=env)
        metrics.watch_targets(engine.availability())
        refresher = asyncio.create_task(metrics.keep_targets_fresh()) if metrics.multiprocess_dir else None
        sealer = Sealer(continuity_secret)
        preload()  # the price database, now rather than on the first answer
        limits = (
            KeyLimits(config, key_tokens, tenants.of, on_op=metrics.count_store_operation)
            if config.keys
            else None
        )
        # the config refused tracing.enabled without the SDK installed
        tracing = Tracing(config.tracing) if config.tracing.enabled else None
        json_answer = json_answer_for(app)
        app[GatewayState.KEY] = state = GatewayState(
            config,
            metrics,
            engine,
            store,
            recorder,
            redactor,
            sealer,
            in_flight=in_flight,
            memo=DecodeMemo(server.transcript_memo_mib << 20, min_bytes=SHORT_BODY),
            inspector=Inspector(config.inspector.enabled, config.inspector.max_bytes),
            prices=PriceBook(config),
            limits=limits,
            tracing=tracing,
            json_answer=json_answer,
            stream_answer=stream_answer_for(app, json_answer),
        )
        try:
            yield
        finally:
            state.books.settle()  # every request answered is accounted for (gateway/books.py)
            if refresher is not None:
                refresher.cancel()
            await recorder.drain()  # turns answered before shutdown are still recorded
            if limits is not None:
                await limits.close()
            if tracing is not None:  # spans still queued are exported (in a thread: it blocks)
                await asyncio.to_thread(tracing.shutdown)
            await store.close()
            await session.close()

    app.cleanup_ctx.append(resources)
    routes: list[web.RouteDef] = []
    models: dict[str, list[ModelsList]] = {}
    for dialect in DIALECTS:  # every route of every dialect runs the one exchange
        for route in dialect.routes:
            routes.append(web.post(route.path, ingress_handler(dialect, route.codec)))
        if dialect.count is not None:
            routes.append(web.post(dialect.count.path, count_tokens_handler(dialect, dialect.count)))
        if dialect.models is not None:
            models.setdefault(dialect.models.path, []).append(dialect.models)
    for path, lists in models.items():
        routes.append(web.get(path, models_handler(lists)))
    routes += gemini.routes()  # after the records' routes: what the Gemini records have no place for
    routes.append(web.get("/healthz", healthz))
    routes.append(web.get("/readyz", readyz))
    routes.append(web.get("/metrics", metrics_endpoint))
    routes.append(web.get(NDJSON_PAGE, page_handler("ndjson.html")))
    if config.inspector.enabled:
        routes.append(web.get(INSPECTOR_PAGE, page_handler("inspector.html")))
        routes += inspector_routes()
    routes.append(web.route(hdrs.METH_ANY, "/{path:.*}", unrouted, name=UNROUTED))  # last
    at_edge = edge(redactor, guard, in_flight)
    app.add_routes([web.RouteDef(r.method, r.path, at_edge(r.handler), r.kwargs) for r in routes])
    return app
