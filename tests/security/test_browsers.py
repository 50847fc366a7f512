"""Browsers and DNS rebinding: a web page in the user's browser cannot make the gateway call a
provider, nor read its answers by rebinding a name to 127.0.0.1 (gateway/browser.py). Checked over
loopback HTTP, then with a real headless Chromium on another origin."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web
from playwright.async_api import Route, async_playwright

from gateway.simulators.base import Reply
from tests.security.conftest import USER, Gateway, loopback_site, serving, split_response
from tests.ui.conftest import FLAGS, chromium  # noqa: F401 - a fixture, shared

TOKEN = "browser-test-token-5Gh8Jk2Lm"
EVIL = "http://evil.test"
ROUTES = {  # path -> a valid body of its dialect
    "/v1/chat/completions": {"model": "claude", "messages": USER},
    "/v1/messages": {"model": "claude", "max_tokens": 64, "messages": USER},
    "/v1/responses": {"model": "claude", "input": "What is six times seven?"},
    "/v1/responses/compact": {"model": "claude", "input": "What is six times seven?"},
    "/v1/messages/count_tokens": {"model": "claude", "messages": USER},
}


def refusals(gateway: Gateway) -> float:
    """Requests answered with a client error, over every ingress."""
    return sum(
        sample.value
        for metric in gateway.metrics.registry.collect()
        if metric.name == "gateway_requests"
        for sample in metric.samples
        if sample.name == "gateway_requests_total" and sample.labels["outcome"] == "client_error"
    )


def provider_calls(gateway: Gateway) -> int:
    return sum(len(state.requests) for state in gateway.hub.states.values())


def error_of(path: str, body: bytes) -> dict[str, Any]:
    """The error object, checked to be in the path's dialect envelope."""
    payload = orjson.loads(body)
    if path.startswith("/v1/messages"):
        assert payload["type"] == "error" and set(payload["error"]) == {"type", "message"}, body
    else:
        assert set(payload) == {"error"} and "code" in payload["error"], body
    return payload["error"]


def refused_for(path: str, body: bytes, code: str) -> bool:
    """Refused with `code` (Anthropic's envelope has no code: its type and wording say it)."""
    error = error_of(path, body)
    if path.startswith("/v1/messages"):
        return error["type"] == "permission_error" and code.split("_")[0].title() in error["message"]
    return error["code"] == code


@pytest.mark.parametrize(
    "content_type", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None]
)
async def test_api_bodies_must_be_json(content_type):
    async with serving() as gateway:
        for path, body in ROUTES.items():
            headers = {} if content_type is None else {"Content-Type": content_type}
            if content_type is None:
                headers["Content-Type"] = ""  # aiohttp would otherwise label bytes octet-stream
            status, _, answer = await gateway.chat(orjson.dumps(body), headers, path)
            assert status == 415, (path, answer)
            assert "application/json" in error_of(path, answer)["message"]
        assert provider_calls(gateway) == 0
        await gateway.serves_normally()


async def test_a_json_media_type_with_parameters_is_json():
    async with serving() as gateway:
        gateway.hub.states["anthropic"].push(Reply(text="ok"))
        status, _, body = await gateway.chat(
            ROUTES["/v1/chat/completions"], {"Content-Type": "Application/JSON; charset=utf-8"}
        )
        assert status == 200, body


@pytest.mark.parametrize("host", ["evil.test", "evil.test:8787", "localhost.evil.test", "[::1].evil", "a b"])
async def test_a_host_that_is_not_the_gateway_is_refused(host):
    async with serving() as gateway:
        for method, path in (("GET", "/v1/models"), ("GET", "/metrics"), ("GET", "/ui/ndjson.html")):
            status, _, body = await gateway.request(method, path, {"Host": host})
            assert status == 403 and refused_for(path, body, "host_not_allowed"), (path, body)
        for path, body in ROUTES.items():
            status, _, answer = await gateway.chat(body, {"Host": host}, path)
            assert status == 403 and refused_for(path, answer, "host_not_allowed"), (path, answer)
        assert provider_calls(gateway) == 0


async def test_loopback_names_and_ip_addresses_are_the_gateway():
    async with serving() as gateway:
        port = gateway.port
        for host in (
            "localhost",
            f"localhost:{port}",
            "127.0.0.1",
            f"127.0.0.1:{port}",
            f"[::1]:{port}",
            "LOCALHOST:1",
            "10.0.0.7:8787",
            "[2001:db8::1]",
        ):
            status, _, body = await gateway.request("GET", "/v1/models", {"Host": host})
            assert status == 200, (host, body)


async def test_allowed_hosts_and_the_bind_name_are_served():
    def hosts(config: dict) -> None:
        config["server"]["allowed_hosts"] = ["gateway.internal", ".corp.example"]

    async with serving(hosts) as gateway:
        for host, expected in (
            ("gateway.internal:8787", 200),
            ("corp.example", 200),
            ("llm.corp.example", 200),
            ("evilcorp.example", 403),
            ("gateway.internal.evil.test", 403),
        ):
            status, _, _ = await gateway.request("GET", "/v1/models", {"Host": host})
            assert status == expected, host


async def test_a_foreign_origin_is_refused_before_its_body_is_read():
    async with serving() as gateway:
        reader, writer = await gateway.connect()
        # the head announces a body that never comes: the refusal cannot have waited for it
        writer.write(
            b"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.test\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        )
        await writer.drain()
        status, _, body = split_response(await asyncio.wait_for(reader.read(65536), 10))
        writer.close()
        assert status == 403 and refused_for("/v1/messages", body, "origin_not_allowed")
        for origin in (EVIL, "null", f"http://localhost:{gateway.port + 1}", "https://127.0.0.1"):
            for path, body in ROUTES.items():
                status, headers, answer = await gateway.chat(body, {"Origin": origin}, path)
                assert status == 403 and refused_for(path, answer, "origin_not_allowed"), (origin, path)
                assert "Access-Control-Allow-Origin" not in headers
            status, _, _ = await gateway.request("GET", "/v1/models", {"Origin": origin})
            assert status == 403
        assert provider_calls(gateway) == 0


async def test_the_gateways_own_pages_are_same_origin():
    async with serving() as gateway:
        for origin in (gateway.url, f"http://localhost:{gateway.port}"):
            host = origin.removeprefix("http://")
            gateway.hub.states["anthropic"].push(Reply(text="hi"))
            status, headers, body = await gateway.chat(
                ROUTES["/v1/chat/completions"], {"Origin": origin, "Host": host}
            )
            assert status == 200, body
            assert "Access-Control-Allow-Origin" not in headers  # no CORS needed, none given


async def test_allowed_origins_get_cors():
    app = "https://app.example.com"

    def origins(config: dict) -> None:
        config["server"]["allowed_origins"] = [app, "vscode-webview://4f2a"]  # an editor's webview too

    async with serving(origins) as gateway:
        preflight = {
            "Origin": app,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization",
        }
        status, headers, _ = await gateway.request("OPTIONS", "/v1/chat/completions", preflight)
        assert status == 204
        assert headers["Access-Control-Allow-Origin"] == app
        assert "POST" in headers["Access-Control-Allow-Methods"]
        assert headers["Access-Control-Allow-Headers"] == "content-type, authorization"
        status, _, _ = await gateway.request("OPTIONS", "/v1/chat/completions", {**preflight, "Origin": EVIL})
        assert status == 403
        webview = {**preflight, "Origin": "vscode-webview://4f2a"}
        status, headers, _ = await gateway.request("OPTIONS", "/v1/messages", webview)
        assert status == 204 and headers["Access-Control-Allow-Origin"] == "vscode-webview://4f2a"

        gateway.hub.states["anthropic"].push(Reply(text="hi"))
        status, headers, _ = await gateway.chat(ROUTES["/v1/chat/completions"], {"Origin": app})
        assert status == 200
        assert headers["Access-Control-Allow-Origin"] == app and headers["Vary"] == "Origin"
        # a listed origin still sends JSON: a text/plain body is refused like anyone's
        status, headers, _ = await gateway.chat(
            orjson.dumps(ROUTES["/v1/chat/completions"]), {"Origin": app, "Content-Type": "text/plain"}
        )
        assert status == 415 and headers["Access-Control-Allow-Origin"] == app


async def test_metrics_take_the_token_from_loopback_too():
    def auth(config: dict) -> None:
        config["auth"] = {"tokens_env": ["BROWSER_TOKEN"]}

    def auth_open_metrics(config: dict) -> None:
        config["auth"] = {"tokens_env": ["BROWSER_TOKEN"], "metrics_from_loopback_without_token": True}

    env = {"BROWSER_TOKEN": TOKEN}
    async with serving(auth, env=env) as gateway:
        assert (await gateway.request("GET", "/metrics"))[0] == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert (await gateway.request("GET", "/metrics", bearer))[0] == 200
    async with serving(auth_open_metrics, env=env) as gateway:
        assert (await gateway.request("GET", "/metrics"))[0] == 200
        forwarded = {"X-Forwarded-For": "203.0.113.5"}
        assert (await gateway.request("GET", "/metrics", forwarded))[0] == 401


# -- a real browser ------------------------------------------------------------------------

ATTACK_PAGE = """<!doctype html><html><body>
<iframe name="sink"></iframe>
<script>
window.results = {};
async function attempt(name, run) {
  try { window.results[name] = await run(); } catch (e) { window.results[name] = "blocked: " + e.name; }
}
function formPost(url, enctype, name, value) {
  return new Promise(resolve => {
    const frame = document.createElement("iframe");
    frame.name = "f" + Math.random().toString(36).slice(2);
    document.body.appendChild(frame);
    frame.onload = () => resolve("submitted");
    const form = document.createElement("form");
    form.method = "POST"; form.action = url; form.enctype = enctype; form.target = frame.name;
    const input = document.createElement("input");
    input.name = name; input.value = value;
    form.appendChild(input); document.body.appendChild(form); form.submit();
  });
}
window.attack = async (gateway, bodies) => {
  for (const [path, body] of Object.entries(bodies)) {
    const text = JSON.stringify(body);
    await attempt("text/plain " + path, async () => {
      const r = await fetch(gateway + path, {method: "POST", mode: "no-cors", body: text,
                                             headers: {"Content-Type": "text/plain"}});
      return r.type;
    });
    await attempt("json " + path, async () => {
      const r = await fetch(gateway + path, {method: "POST", body: text,
                                             headers: {"Content-Type": "application/json"}});
      return r.status;
    });
    // a text/plain form sends `name=value`: split the JSON so that it stays JSON
    await attempt("form text/plain " + path, () =>
      formPost(gateway + path, "text/plain", text.slice(0, -1) + ', "pad": "', '"}'));
    await attempt("form urlencoded " + path, () =>
      formPost(gateway + path, "application/x-www-form-urlencoded", "body", text));
  }
  await attempt("read models", async () => (await fetch(gateway + "/v1/models")).status);
  return window.results;
};
// DNS rebinding: this page's own origin now resolves to the gateway, so its requests are
// same-origin and their answers readable
window.rebound = async (bodies) => {
  const out = {};
  for (const path of ["/v1/models", "/metrics", "/ui/ndjson.html"]) {
    out["GET " + path] = (await fetch(path)).status;
  }
  for (const [path, body] of Object.entries(bodies)) {
    const r = await fetch(path, {method: "POST", body: JSON.stringify(body),
                                 headers: {"Content-Type": "application/json"}});
    out["POST " + path] = r.status;
  }
  return out;
};
</script></body></html>"""


@asynccontextmanager
async def attacker_site() -> AsyncIterator[int]:
    """The attacker's own web server on loopback (its port: the page's origin is not the gateway's)."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=ATTACK_PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    async with loopback_site(app) as port:
        yield port


# evil.test resolves to loopback: the attacker's site, then (rebinding) the gateway. Chromium's
# own Private/Local Network Access blocking is off: the gateway must hold without it (other
# browsers have none, and a page the user allows local access is a page like any other).
ATTACKER_FLAGS = [
    *FLAGS,
    "--host-resolver-rules=MAP evil.test 127.0.0.1",
    "--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,"
    "PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks",
]


async def test_a_page_on_another_origin_makes_no_provider_call(chromium):  # noqa: F811
    async with serving() as gateway, attacker_site() as port, async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium, headless=True, args=ATTACKER_FLAGS
        )
        try:
            page = await browser.new_page()
            await page.goto(f"{EVIL}:{port}/")
            results = await page.evaluate("([g, b]) => window.attack(g, b)", [gateway.url, ROUTES])
            assert results["read models"].startswith("blocked")
            for path in ROUTES:
                assert results[f"json {path}"].startswith("blocked")  # its preflight was refused
                assert results[f"text/plain {path}"] == "opaque"  # sent (and refused: see below)
                assert results[f"form text/plain {path}"] == "submitted"
                assert results[f"form urlencoded {path}"] == "submitted"
            # every one of them reached the gateway and was refused there (not by the browser):
            # per route three simple posts and the JSON post's preflight, and the models read
            assert refusals(gateway) == 4 * len(ROUTES) + 1

            # the rebinding: the attacker's page was served under the name and port the gateway
            # then answers at, so the page's requests are same-origin (their answers readable)
            rebound = f"{EVIL}:{gateway.port}"

            async def attacker_before_rebinding(route: Route) -> None:
                await route.fulfill(status=200, content_type="text/html", body=ATTACK_PAGE)

            await page.route(f"{rebound}/", attacker_before_rebinding)
            await page.goto(f"{rebound}/")
            statuses = await page.evaluate("(b) => window.rebound(b)", ROUTES)
            assert statuses and set(statuses.values()) == {403}, statuses
        finally:
            await browser.close()
        assert provider_calls(gateway) == 0
        await gateway.serves_normally()


def test_host_verdicts_are_kept_for_allowed_values_only():
    from aiohttp.test_utils import make_mocked_request

    from gateway.browser import BrowserPolicy, check_host
    from gateway.ingress.errors import ClientError

    policy = BrowserPolicy.from_lists(["gateway.internal"], [])

    def host(value: str) -> tuple[str, int | None]:
        return check_host(make_mocked_request("GET", "/v1/models", headers={"Host": value}), policy)

    for _ in range(2):  # judged, then found
        assert host("Gateway.Internal:8787") == ("gateway.internal", 8787)
        with pytest.raises(ClientError) as refused:
            host("gateway.internal.evil.test")
        assert refused.value.status == 403
    assert list(policy.allowed_hosts) == ["Gateway.Internal:8787"]
    for n in range(300):  # past the bound, a value is still judged, only no longer kept
        assert host(f"10.0.0.{n % 200}:{n + 1}") == (f"10.0.0.{n % 200}", n + 1)
    assert len(policy.allowed_hosts) == 256
    with pytest.raises(ClientError):
        host("gateway.internal.evil.test")
