"""With `--workers N`, each worker's captures stay in that worker; siblings reach them over a
private Unix socket per worker (in a directory only the gateway's user can enter, made by the
supervisor). The socket serves the same operations as the public API, for one tenant each, named
by the asking worker (which has already authenticated its client).

A sibling that does not answer (restarting, stopped) is left out of the answer, never an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

log = logging.getLogger("gateway")

TENANT_HEADER = "X-Inspector-Tenant"
PEER_TIMEOUT = aiohttp.ClientTimeout(total=10)


def socket_path(directory: str, index: int) -> str:
    return str(Path(directory) / f"worker-{index}.sock")


def _session(path: str, timeout: aiohttp.ClientTimeout | None = PEER_TIMEOUT) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=path), timeout=timeout)


async def _ask(
    path: str, method: str, route: str, tenant: str, params: dict[str, str] | None, body: Any
) -> tuple[int, Any] | None:
    try:
        async with (
            _session(path) as session,
            session.request(
                method,
                f"http://worker{route}",
                params=params,
                data=orjson.dumps(body) if body is not None else None,
                headers={TENANT_HEADER: tenant, "Content-Type": "application/json"},
            ) as response,
        ):
            return response.status, orjson.loads(await response.read())
    except (aiohttp.ClientError, OSError, TimeoutError, orjson.JSONDecodeError) as exc:
        log.debug("inspector: worker socket %s did not answer: %s", path, exc)
        return None


async def ask_all(
    paths: tuple[str, ...],
    method: str,
    route: str,
    tenant: str,
    params: dict[str, str] | None = None,
    body: Any = None,
) -> list[tuple[int, Any]]:
    """Every sibling's answer (status, JSON), those that answered."""
    answers = await asyncio.gather(*(_ask(p, method, route, tenant, params, body) for p in paths))
    return [a for a in answers if a is not None]


async def follow(path: str, tenant: str, deliver: Callable[[dict[str, Any]], None]) -> None:
    """A sibling's live feed, each summary handed to `deliver`, until cancelled; reconnects while
    the sibling restarts."""
    while True:
        try:
            async with (
                _session(path, timeout=None) as session,
                session.get("http://worker/events", headers={TENANT_HEADER: tenant}) as response,
            ):
                async for line in response.content:
                    if line.startswith(b"data: "):
                        deliver(orjson.loads(line[6:]))
        except (aiohttp.ClientError, OSError, orjson.JSONDecodeError) as exc:
            log.debug("inspector: worker feed %s: %s", path, exc)
        await asyncio.sleep(1.0)


Local = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


def peer_app(routes: dict[tuple[str, str], Local]) -> web.Application:
    """The app on a worker's socket: `routes` maps (method, path) to the local operation, called
    with the tenant the asking sibling named."""
    app = web.Application()
    for (method, route), local in routes.items():
        app.router.add_route(method, route, _with_tenant(local))
    return app


def _with_tenant(local: Local) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await local(request, request.headers.get(TENANT_HEADER, ""))

    return handle


def clear_socket(path: str) -> None:
    """Remove a socket a crashed worker left (before serving, from synchronous code)."""
    with contextlib.suppress(FileNotFoundError):
        Path(path).unlink()


async def serve_peer(app: web.Application, path: str) -> web.AppRunner:
    # handler_cancellation: a sibling's feed that went away ends here too
    runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True)
    await runner.setup()
    await web.UnixSite(runner, path).start()
    return runner
