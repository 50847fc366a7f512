"""Run the gateway server until SIGINT/SIGTERM, then drain in-flight requests and exit.

Shutdown order: stop listening (new connections are refused), let in-flight requests and
streams finish for up to `[server] shutdown_grace_seconds` (then cancel what is left), then
release the shared resources: pending continuity writes, the store, the upstream session."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from aiohttp import web

from gateway.access_log import configure_logging
from gateway.app import create_app
from gateway.config import GatewayConfig
from gateway.redaction import secrets_redactor

if TYPE_CHECKING:
    from gateway.workers import Worker

log = logging.getLogger("gateway")


async def serve(
    config: GatewayConfig, env: Mapping[str, str] | None = None, worker: Worker | None = None
) -> None:
    """`worker`: this process is one of several on the port (gateway/workers.py); the supervisor
    prints the listening and stopping lines once for all of them."""
    configure_logging(config.server.log_level, secrets_redactor(config, env))
    if worker is None:
        app = create_app(config, env)
    else:
        app = create_app(config, env, worker.metrics(), continuity_key=worker.continuity_key)
    # handler_cancellation: a client that disconnects cancels its handler, and with it the
    # upstream request, instead of letting the provider generate for nobody
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,  # the gateway writes its own access log (gateway/access_log.py)
        handler_cancellation=True,
        shutdown_timeout=config.server.shutdown_grace_seconds,
    )
    await runner.setup()
    host, port = config.server.host, config.server.port
    site = web.TCPSite(runner, host, port, reuse_port=worker is not None)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)  # a second signal during the drain changes nothing
    if worker is None:
        print(f"gateway listening on http://{host}:{port}", flush=True)
    else:
        worker.ready()
    try:
        await stop.wait()
    finally:
        grace = config.server.shutdown_grace_seconds
        if worker is None:
            print(
                f"gateway stopping: draining in-flight requests (up to {grace:g}s)",
                file=sys.stderr,
                flush=True,
            )
        await runner.cleanup()  # stops accepting, waits up to the grace period, closes resources
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        log.info("gateway stopped")
