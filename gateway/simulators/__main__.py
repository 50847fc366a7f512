"""`python -m gateway.simulators [--port 8799] [--script FILE]`: every provider simulator on one
loopback port, for running the gateway by hand against config/simulated.toml (or any config, with
`GATEWAY_SIMULATORS_URL`). They answer tool-then-answer, after the replies of `--script` if given
(see gateway/simulators/script.py for the file format)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from gateway.simulators.base import KINDS, SimulatorHub
from gateway.simulators.script import ScriptError, install, load_script


async def _run(host: str, port: int, api_key: str, script_path: str | None) -> None:
    hub = SimulatorHub(host, port, api_key)
    install(hub, load_script(script_path) if script_path else [])
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
    parser.add_argument(
        "--script", metavar="FILE", help="JSON or TOML file of replies to give first (then tool-then-answer)"
    )
    args = parser.parse_args()
    try:
        asyncio.run(_run(args.host, args.port, args.api_key, args.script))
    except (ScriptError, OSError) as exc:
        print(f"python -m gateway.simulators: {exc}", file=sys.stderr)
        sys.exit(2)


main()
