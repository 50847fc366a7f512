"""Run the gateway server until SIGINT/SIGTERM, then drain in-flight requests and exit.

Shutdown order: stop listening (new connections are refused) and close idle connections, let
in-flight requests and streams finish for up to `[server] shutdown_grace_seconds`, then end what
is left - each open stream with its dialect's error event, each unanswered request with a 503 -
within `lifecycle.END_BOUND` more, and release the shared resources: pending continuity writes,
the store, the upstream session."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.access_log import configure_logging
from gateway.app import IN_FLIGHT, create_app
from gateway.config import GatewayConfig
from gateway.handlers.inspector import worker_app
from gateway.inspector.peers import clear_socket, serve_peer, socket_path
from gateway.lifecycle import END_BOUND
from gateway.redaction import secrets_redactor
from gateway.server import ConnectionLimits, GatewayRunner, raise_open_file_limit
from gateway.state import GatewayState

if TYPE_CHECKING:
    from gateway.workers import Worker

log = logging.getLogger("gateway")


def connection_limits(config: GatewayConfig) -> ConnectionLimits:
    server = config.server
    return ConnectionLimits(
        server.max_connections, server.header_timeout_seconds, server.write_timeout_seconds
    )


async def start(app: web.Application, config: GatewayConfig, reuse_port: bool = False) -> GatewayRunner:
    """The app served on the configured host and port, with the gateway's connection limits.
    `reuse_port`: one of several worker processes on the port (SO_REUSEPORT)."""
    # handler_cancellation: a client that disconnects cancels its handler, and with it the
    # upstream request, instead of letting the provider generate for nobody
    runner = GatewayRunner(
        app,
        connection_limits(config),
        handle_signals=False,
        access_log=None,  # the gateway writes its own access log (gateway/access_log.py)
        handler_cancellation=True,
        # aiohttp's own wait, only for what `stop` left running (it waits this long twice)
        shutdown_timeout=END_BOUND / 2,
    )
    await runner.setup()
    site = web.TCPSite(runner, config.server.host, config.server.port, reuse_port=reuse_port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def serve_siblings(app: web.Application, worker: Worker) -> web.AppRunner:
    """This worker's inspector socket for its siblings, and theirs to ask (gateway/inspector)."""
    state: GatewayState = app[GatewayState.KEY]
    paths = [socket_path(worker.inspector_dir, i) for i in range(worker.count)]
    state.inspector.peers = tuple(p for i, p in enumerate(paths) if i != worker.index)
    siblings = worker_app()
    siblings[GatewayState.KEY] = state
    clear_socket(paths[worker.index])
    return await serve_peer(siblings, paths[worker.index])


async def stop(runner: GatewayRunner, grace: float) -> None:
    """Stop accepting, drain for up to `grace` seconds, end the rest, release resources."""
    state: GatewayState | None = runner.app.get(GatewayState.KEY)
    if state is not None:
        state.inspector.stopping.set()  # live inspector feeds end now, not at the grace period's end
    for site in list(runner.sites):
        await site.stop()
    server = runner.server
    if server is not None:
        # idle keep-alive connections close now; busy ones after their answer
        server.pre_shutdown()
    await runner.app[IN_FLIGHT].drain(grace)
    await runner.cleanup()


# Collect the youngest generation after this many allocations instead of CPython's 700, and the
# older ones less often. A large agent request allocates some 50,000 container objects (the parsed
# body, the transcript); at 700 the collector ran dozens of times per request and walked the decode
# memo's long-lived entries at each older collection: about a fifth of the gateway's time on a
# 1,000-message turn (bench/README.md). Cyclic garbage is rare on the request path.
GC_THRESHOLDS = (20_000, 50, 100)


def tune_garbage_collector() -> None:
    """Once serving: what startup built (modules, validators, the app) moves out of the
    collector's sight (until a large request's objects are thawed with it: gateway/offload.py),
    and collections become rarer (`GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(
    config: GatewayConfig, env: Mapping[str, str] | None = None, worker: Worker | None = None
) -> None:
    """`worker`: this process is one of several on the port (gateway/workers.py); the supervisor
    prints the listening and stopping lines once for all of them."""
    configure_logging(config.server.log_level, secrets_redactor(config, env))
    raise_open_file_limit()
    if worker is None:
        app = create_app(config, env)
    else:
        app = create_app(config, env, worker.metrics(), continuity_key=worker.continuity_key)
    runner = await start(app, config, reuse_port=worker is not None)
    siblings = await serve_siblings(app, worker) if worker is not None and worker.inspector_dir else None
    tune_garbage_collector()
    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)  # a second signal during the drain changes nothing
    host, port = config.server.host, config.server.port
    if worker is None:
        print(f"gateway listening on http://{host}:{port}", flush=True)
    else:
        worker.ready()
    try:
        await stop_requested.wait()
    finally:
        grace = config.server.shutdown_grace_seconds
        if worker is None:
            print(
                f"gateway stopping: draining in-flight requests (up to {grace:g}s)",
                file=sys.stderr,
                flush=True,
            )
        await stop(runner, grace)
        if siblings is not None:
            await siblings.cleanup()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        log.info("gateway stopped")
