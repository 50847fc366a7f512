"""The inspector's HTTP API and page (README "Inspector").

    GET  /inspector                                the page (gateway/ui/inspector.html)
    GET  /inspector/api/requests?limit=&session=&model=&provider=&outcome=
    GET  /inspector/api/requests/{id}
    POST /inspector/api/requests/{id}/preview      {"model": "<group or provider/model>"}
    GET  /inspector/api/events                     server-sent events: one summary per request

Who may call them is decided by the request guard (gateway/security.py): loopback clients only
without [auth], a client token with it. A token sees only the requests made with it (its tenant):
the list, a request, its preview and the feed are all scoped by the caller's tenant, here and on
every sibling worker (gateway/inspector/peers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web

from gateway.exchange import REQUEST_ID_HEADER
from gateway.ingress.errors import ClientError, invalid
from gateway.inspector import Inspector
from gateway.inspector.capture import Capture
from gateway.inspector.peers import ask_all, follow, peer_app
from gateway.inspector.preview import preview
from gateway.inspector.views import detail, summary
from gateway.state import TENANT, GatewayState

PAGE = "/inspector"
API = "/inspector/api"
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
FILTERS = ("session", "model", "provider", "outcome")
KEEPALIVE_SECONDS = 15.0


def _state(request: web.Request) -> GatewayState:
    return request.app[GatewayState.KEY]


def _tenant(request: web.Request) -> str:
    """The viewer's tenant, decided by the guard from the token it admitted (gateway/security.py):
    a token sees only the requests made with it."""
    return request.get(TENANT, "")


def _json(data: Any, status: int = 200) -> web.Response:
    """An answer to a sibling worker (which shows it, redacted, to its client)."""
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _shown(request: web.Request, data: Any, request_id: str | None = None) -> web.Response:
    """A public answer: what it shows passes the redactor (a client may have pasted a provider key
    into a prompt; an upstream error may quote one)."""
    headers = {REQUEST_ID_HEADER: request_id} if request_id else None
    body = _state(request).redactor.data(orjson.dumps(data))
    return web.Response(body=body, content_type="application/json", headers=headers)


def _not_found(capture_id: str) -> ClientError:
    return ClientError(
        404,
        f"no request {capture_id!r} is kept by the inspector (unknown, another token's, or evicted)",
        code="request_not_found",
        headers={REQUEST_ID_HEADER: capture_id},
    )


# -- the operations, on this process's captures --------------------------------------------------


def _filters(query: Mapping[str, str]) -> tuple[int, dict[str, str]]:
    raw = query.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(raw)
    except ValueError:
        raise invalid(f"limit must be an integer, got {raw!r}", param="limit", code="invalid_type") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise invalid(f"limit must be 1-{MAX_LIMIT}", param="limit", code="invalid_value")
    return limit, {name: query[name] for name in FILTERS if query.get(name)}


def _local_list(
    inspector: Inspector, tenant: str, limit: int, wanted: dict[str, str]
) -> list[dict[str, Any]]:
    def keep(capture: Capture) -> bool:
        return capture.tenant == tenant and all(getattr(capture, k) == v for k, v in wanted.items())

    inspector.before_read()
    return [summary(c) for c in inspector.ring.newest(keep, limit)]


def _local_capture(inspector: Inspector, tenant: str, capture_id: str) -> Capture | None:
    inspector.before_read()
    capture = inspector.ring.get(capture_id)
    return capture if capture is not None and capture.tenant == tenant else None


async def _preview_body(request: web.Request) -> str:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise invalid(
            'the body must be JSON: {"model": "<group or provider/model>"}', code="invalid_json"
        ) from None
    model = body.get("model") if isinstance(body, dict) else None
    if not isinstance(model, str) or not model:
        raise invalid("a model group or <provider>/<model> is required", param="model")
    return model


async def local_list(request: web.Request, tenant: str) -> web.Response:
    limit, wanted = _filters(request.query)
    return _json(_local_list(_state(request).inspector, tenant, limit, wanted))


async def local_detail(request: web.Request, tenant: str) -> web.Response:
    capture = _local_capture(_state(request).inspector, tenant, request.match_info["id"])
    return _json(None, 404) if capture is None else _json(detail(capture))


async def local_preview(request: web.Request, tenant: str) -> web.Response:
    state = _state(request)
    capture = _local_capture(state.inspector, tenant, request.match_info["id"])
    if capture is None:
        return _json(None, 404)
    model = await _preview_body(request)
    try:
        return _json(await preview(state, capture, model))
    except ClientError as exc:
        return _json({"error": {"status": exc.status, "message": exc.message, "code": exc.code}}, 400)


async def local_events(request: web.Request, tenant: str) -> web.StreamResponse:
    inspector = _state(request).inspector
    queue = inspector.subscribe(tenant)
    try:
        return await _sse(request, inspector, queue)
    finally:
        inspector.unsubscribe(queue)


PEER_ROUTES = {
    ("GET", "/requests"): local_list,
    ("GET", "/requests/{id}"): local_detail,
    ("POST", "/requests/{id}/preview"): local_preview,
    ("GET", "/events"): local_events,
}


def worker_app() -> web.Application:
    """What a worker serves its siblings (gateway/inspector/peers.py); the state is set by serve."""
    return peer_app(PEER_ROUTES)


# -- the public API: this process and its siblings -----------------------------------------------


async def list_requests(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    limit, wanted = _filters(request.query)
    found = _local_list(state.inspector, tenant, limit, wanted)
    if state.inspector.peers:
        params = {"limit": str(limit), **wanted}
        for status, items in await ask_all(state.inspector.peers, "GET", "/requests", tenant, params):
            if status == 200:
                found.extend(items)
        found.sort(key=lambda s: s["time"], reverse=True)
        del found[limit:]
    return _shown(request, found)


async def get_request(request: web.Request) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    capture_id = request.match_info["id"]
    capture = _local_capture(state.inspector, tenant, capture_id)
    if capture is not None:
        return _shown(request, detail(capture), capture_id)
    for status, found in await ask_all(state.inspector.peers, "GET", f"/requests/{capture_id}", tenant):
        if status == 200:
            return _shown(request, found, capture_id)
    raise _not_found(capture_id)


async def preview_request(request: web.Request) -> web.Response:
    capture_id = request.match_info["id"]
    try:
        return await _preview_anywhere(request, capture_id)
    except ClientError as exc:
        exc.headers[REQUEST_ID_HEADER] = capture_id
        raise


async def _preview_anywhere(request: web.Request, capture_id: str) -> web.Response:
    state, tenant = _state(request), _tenant(request)
    model = await _preview_body(request)
    capture = _local_capture(state.inspector, tenant, capture_id)
    if capture is not None:
        return _shown(request, await preview(state, capture, model), capture_id)
    route = f"/requests/{capture_id}/preview"
    for status, found in await ask_all(state.inspector.peers, "POST", route, tenant, body={"model": model}):
        if status == 200:
            return _shown(request, found, capture_id)
        if status == 400:
            error = found["error"]
            raise ClientError(error["status"], error["message"], code=error["code"])
    raise _not_found(capture_id)


async def events(request: web.Request) -> web.StreamResponse:
    state, tenant = _state(request), _tenant(request)
    inspector = state.inspector
    queue = inspector.subscribe(tenant)

    def deliver(line: dict[str, Any]) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            queue.put_nowait(line)

    followers = [asyncio.create_task(follow(path, tenant, deliver)) for path in inspector.peers]
    try:
        return await _sse(request, inspector, queue)
    finally:
        inspector.unsubscribe(queue)
        for task in followers:
            task.cancel()


async def _sse(
    request: web.Request, inspector: Inspector, queue: asyncio.Queue[dict[str, Any]]
) -> web.StreamResponse:
    """Summaries as `data:` lines until the client goes away or the gateway stops (a feed never
    holds up a shutdown), a comment line when quiet."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    await response.write(b": inspector feed\n\n")
    redactor = _state(request).redactor
    stopping = asyncio.ensure_future(inspector.stopping.wait())
    try:
        while not stopping.done():
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait(
                (getter, stopping), timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
            )
            if getter in done:
                line = redactor.data(orjson.dumps(getter.result()))
                await response.write(b"data: " + line + b"\n\n")
                continue
            getter.cancel()
            if not done:
                await response.write(b": keep-alive\n\n")
        await response.write_eof()
        return response
    finally:
        stopping.cancel()


def routes() -> list[web.RouteDef]:
    return [
        web.get(f"{API}/requests", list_requests),
        web.get(f"{API}/requests/{{id}}", get_request),
        web.post(f"{API}/requests/{{id}}/preview", preview_request),
        web.get(f"{API}/events", events),
    ]
