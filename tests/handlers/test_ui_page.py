"""The example NDJSON page as the gateway serves it: open without a token (the API behind it is
not), locked down by its Content-Security-Policy, and the same page the README shows."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

from gateway.handlers.ui import NDJSON_PAGE, content_security_policy
from gateway.simulators.base import SimulatorHub
from tests.e2e.ndjson_client import ndjson_gateway

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "gateway" / "ui" / "ndjson.html"
TOKEN = "page-test-token-0123456789"


def directives(policy: str) -> dict[str, list[str]]:
    return {name: values for name, *values in (part.split() for part in policy.split(";"))}


async def test_the_page_is_open_and_its_api_is_not():
    async with SimulatorHub() as hub, ndjson_gateway(hub, token=TOKEN) as gw, aiohttp.ClientSession() as http:
        async with http.get(f"{gw.url}{NDJSON_PAGE}") as resp:
            assert resp.status == 200
            assert resp.content_type == "text/html" and resp.charset == "utf-8"
            assert await resp.text() == PAGE.read_text(encoding="utf-8")
            policy = directives(resp.headers["Content-Security-Policy"])
        body = {"model": "claude", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
        async with http.post(f"{gw.url}/v1/chat/completions", json=body) as resp:
            assert resp.status == 401
    assert policy["default-src"] == ["'none'"] and policy["connect-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["form-action"] == ["'none'"]
    # exactly the page's one inline script and one style block, by hash: nothing injected runs
    assert len(policy["script-src"]) == 1 and policy["script-src"][0].startswith("'sha256-")
    assert len(policy["style-src"]) == 1 and policy["style-src"][0].startswith("'sha256-")


def test_the_policy_follows_the_pages_code():
    page = PAGE.read_text(encoding="utf-8")
    edited = page.replace("const $ =", "const $$ =")
    assert (
        directives(content_security_policy(page))["script-src"]
        != directives(content_security_policy(edited))["script-src"]
    )
    assert directives(content_security_policy("<p>no code</p>"))["script-src"] == ["'none'"]


def test_the_readme_shows_the_page_that_ships():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = re.findall(r"```html\n(.*?)```", readme, re.S)
    assert shown == [PAGE.read_text(encoding="utf-8")]
