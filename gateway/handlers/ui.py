"""The example UI page for the NDJSON event stream (gateway/ui/ndjson.html, shown in the README).

It is served by the gateway itself so that it calls the API from the same origin: the gateway
sends no CORS headers on purpose (a page from another origin must not be able to spend a local
gateway's provider keys). The page is static and carries no secret, so it is served without a
token; its Content-Security-Policy lets it run only its own inline script and talk only to the
gateway.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Awaitable, Callable
from importlib.resources import files

from aiohttp import web

NDJSON_PAGE = "/ui/ndjson.html"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_INLINE = {kind: re.compile(rf"<{kind}>(.*?)</{kind}>", re.S) for kind in ("script", "style")}


def content_security_policy(page: str) -> str:
    """Only the page's own inline script and style run (by hash), and it connects only to the
    gateway's origin."""
    allowed = {}
    for kind, pattern in _INLINE.items():
        digests = [
            base64.b64encode(hashlib.sha256(m.encode()).digest()).decode() for m in pattern.findall(page)
        ]
        allowed[kind] = " ".join(f"'sha256-{d}'" for d in digests) or "'none'"
    return (
        f"default-src 'none'; script-src {allowed['script']}; style-src {allowed['style']}; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def page_handler(name: str) -> Handler:
    text = (files("gateway") / "ui" / name).read_text(encoding="utf-8")
    body = text.encode()
    headers = {"Content-Security-Policy": content_security_policy(text), "Cache-Control": "no-cache"}

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/html", charset="utf-8", headers=headers)

    return page
