"""`python -m gateway.simulators [--port 8799]`: every provider simulator on one loopback port,
for running the gateway by hand against config/simulated.toml."""

from __future__ import annotations

import argparse
import asyncio
import signal

from gateway.simulators.base import KINDS, SimulatorHub


async def _run(host: str, port: int, api_key: str) -> None:
    hub = SimulatorHub(host, port, api_key)
    await hub.start()
    for kind in KINDS:
        print(f"{kind:17} {hub.base_url(kind)}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await hub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m gateway.simulators")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--api-key", default="sim", help="the key every simulator expects (default: sim)")
    args = parser.parse_args()
    asyncio.run(_run(args.host, args.port, args.api_key))


main()
