"""The floor: the least an aiohttp gateway can cost. It forwards the client's request bytes to the
upstream and the answer back (streamed answers chunk by chunk), with the upstream key in place of
the client's headers, and does nothing else: no parsing, routing, repair, logging or metrics.
The bench runs it beside every gateway variant; a gateway's own cost is what it adds above this.

    python bench/relay.py --port P --upstream http://127.0.0.1:S --key-env ENV

Prints `gateway listening on http://127.0.0.1:P` once it accepts connections (the rig's marker).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

import aiohttp
from aiohttp import web


async def _serve(port: int, upstream: str, key: str) -> None:
    http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), auto_decompress=False)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    async def relay(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        async with http.post(upstream + request.path, data=body, headers=headers) as up:
            kind = up.headers.get("Content-Type", "application/json")
            if not kind.startswith("text/event-stream"):
                return web.Response(status=up.status, body=await up.read(), headers={"Content-Type": kind})
            response = web.StreamResponse(status=up.status, headers={"Content-Type": kind})
            await response.prepare(request)
            async for chunk in up.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_post("/{path:.*}", relay)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"gateway listening on http://127.0.0.1:{port}", flush=True)
    await stop.wait()
    await runner.cleanup()
    await http.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/relay.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the upstream's origin, e.g. http://127.0.0.1:8790")
    parser.add_argument("--key-env", required=True, help="the environment variable holding the upstream key")
    args = parser.parse_args()
    serve = _serve(args.port, args.upstream.rstrip("/"), os.environ[args.key_env])
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve)
    else:
        uvloop.run(serve)


if __name__ == "__main__":
    main()
