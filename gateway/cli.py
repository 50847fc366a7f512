"""`gateway serve | demo | inspect | check-config` (also `python -m gateway ...`)."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import io
import sys
from collections.abc import Mapping

from gateway.config import (
    ConfigError,
    GatewayConfig,
    MissingApiKey,
    describe,
    inspect_client,
    load_config,
    resolve_api_key,
    worker_count,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gateway", description="LLM gateway that repairs transcripts between agent apps and providers"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", help="config file (default: $GATEWAY_CONFIG, else config/gateway.toml)")
    serve.add_argument(
        "--host",
        help="address to listen on (default: [server] host, else 127.0.0.1; a non-loopback address"
        " needs [auth] tokens)",
    )
    serve.add_argument("--port", type=int, help="port to listen on (default: [server] port, else 8787)")
    serve.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="log level (default: [server] log_level, else info; also GATEWAY_LOG_LEVEL)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        help="worker processes on the port (default: [server] workers, else one per CPU;"
        " 1 with the memory store)",
    )
    demo = sub.add_parser(
        "demo", help="run a scripted conversation through the gateway against embedded provider simulators"
    )
    demo.add_argument("--quiet", action="store_true", help="print only the summary")
    inspect = sub.add_parser(
        "inspect",
        help="what a running gateway did to its requests (the /inspector API in a terminal)",
        description="The gateway's URL is $GATEWAY_URL (default http://127.0.0.1:8787), the client token"
        " $GATEWAY_TOKEN when [auth] is on.",
    )
    inspect.add_argument("id", nargs="?", help="one request: its attempts, repairs and transcript diff")
    inspect.add_argument("--follow", "-f", action="store_true", help="keep printing new requests as they end")
    inspect.add_argument(
        "--limit", type=int, default=20, help="how many recent requests to list (default 20)"
    )
    inspect.add_argument("--preview", metavar="MODEL", help="with an ID: what MODEL would receive for it")
    inspect.add_argument("--url", help="the gateway's URL (default $GATEWAY_URL, else http://127.0.0.1:8787)")
    check = sub.add_parser(
        "check-config", help="validate a config file and print what it resolves to (no secrets)"
    )
    check.add_argument("path")
    return parser


def missing_keys(config: GatewayConfig, env: Mapping[str, str] | None = None) -> list[str]:
    """One line per provider whose key variable is unset, with the model groups it leaves
    without a target: said at startup, not at the first request that needs it."""
    lines = []
    for name in config.providers:
        try:
            resolve_api_key(config, name, env)
        except MissingApiKey as exc:
            groups = [
                g for g, group in config.models.items() if any(t.provider == name for t in group.targets)
            ]
            stranded = [g for g in groups if all(t.provider == name for t in config.models[g].targets)]
            said = f"{exc}: requests routed to provider {name!r} will fail"
            if stranded:
                said += f" (model groups with no other target: {', '.join(stranded)})"
            lines.append(said)
    return lines


def _enable_faulthandler() -> None:
    """A fatal signal (a SIGBUS from a memory-mapped SQLite file that another program made
    unwritable or truncated) then leaves a traceback on stderr instead of nothing. An stderr
    without a file descriptor (an embedding that captures it) cannot take one: nothing to do."""
    try:
        faulthandler.enable()
    except (io.UnsupportedOperation, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "check-config":
            config = load_config(args.path)
            print(describe(config), end="")
            return 0
        if args.command == "serve":
            config = load_config(
                args.config, host=args.host, port=args.port, workers=args.workers, log_level=args.log_level
            )
            for line in missing_keys(config):
                print(f"gateway: warning: {line}", file=sys.stderr, flush=True)
            _enable_faulthandler()
            workers = worker_count(config)
            if workers > 1:
                from gateway.workers import serve_workers

                return serve_workers(config, workers)
            from gateway.eventloop import run
            from gateway.serve import serve

            run(serve(config), config.server.event_loop)
            return 0
        if args.command == "inspect":
            from gateway.inspect_cli import run as inspect

            if args.id is not None and args.follow:
                print("gateway inspect: --follow lists new requests; it takes no ID", file=sys.stderr)
                return 2
            url, token = inspect_client()
            return inspect(args.url or url, token, args.id, args.follow, args.limit, args.preview)
        if args.command == "demo":
            from gateway.demo import run_demo

            return asyncio.run(run_demo(verbose=not args.quiet))
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1
    return 2  # pragma: no cover - argparse requires a command
