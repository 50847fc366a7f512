"""Run the gateway server until SIGINT/SIGTERM, then drain in-flight requests and exit."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Mapping

from aiohttp import web

from gateway.app import create_app
from gateway.config import GatewayConfig


async def serve(config: GatewayConfig, env: Mapping[str, str] | None = None) -> None:
    app = create_app(config, env)
    # handler_cancellation: a client that disconnects cancels its handler, and with it the
    # upstream request, instead of letting the provider generate for nobody
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=config.server.shutdown_grace_seconds,
    )
    await runner.setup()
    host, port = config.server.host, config.server.port
    site = web.TCPSite(runner, host, port)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"gateway listening on http://{host}:{port}", flush=True)
    try:
        await stop.wait()
    finally:
        print("gateway stopping: draining in-flight requests", file=sys.stderr, flush=True)
        await runner.cleanup()  # stops accepting, waits up to the grace period, closes resources
