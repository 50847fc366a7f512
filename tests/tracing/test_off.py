"""With tracing off (the default) the request path holds None instead of a trace, and neither the
SDK's tracing nor the exporter is even imported (redis-py loads parts of the SDK's metrics for
its own observability when they are installed: not ours)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import asyncio, sys
from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.state import GatewayState
from aiohttp.test_utils import TestClient, TestServer

config = config_from_dict({
    "providers": {"p": {"kind": "openai_chat", "base_url": "https://x.test/v1", "api_key_env": "K"}},
    "models": {"g": {"targets": [{"provider": "p", "model": "gpt-4.1"}]}},
})

async def main():
    app = create_app(config, {"K": "k"})
    async with TestClient(TestServer(app)) as client:
        assert app[GatewayState.KEY].tracing is None
        response = await client.post("/v1/chat/completions", json={"model": "nope", "messages": [{"role": "user", "content": "hi"}]})
        assert response.status == 404
    prefixes = ("opentelemetry.sdk.trace", "opentelemetry.exporter", "opentelemetry.propagators")
    loaded = sorted(m for m in sys.modules if m.startswith(prefixes))
    print(loaded)

asyncio.run(main())
"""


def test_tracing_off_loads_no_tracing():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout
