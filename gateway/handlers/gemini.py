"""The Gemini API's routes: `POST {base}/models/{model}:{method}` and the models resource, under
`/v1beta` and `/v1`. The method in the URL picks what runs: generation through the one exchange,
`countTokens` through the routed provider's count, embeddings by the group's Gemini target,
anything else a 404 naming what exists."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.exchange import check_size, plan_for, run_exchange
from gateway.ingress.base import Inbound
from gateway.ingress.errors import ClientError, parse_json_body
from gateway.ingress.gemini.codec import GENERATE, STREAM, GeminiCodec, credential
from gateway.ingress.gemini.decode import Decoded, decode_request
from gateway.ingress.gemini.errors import google_error
from gateway.ingress.gemini.models import model_json, model_list
from gateway.routing.count import count_input_tokens
from gateway.routing.embed import embed
from gateway.state import GatewayState
from gateway.transcript.seal import Sealer

BASES = ("/v1beta", "/v1")
GENERATE_METHOD = "generateContent"
STREAM_METHOD = "streamGenerateContent"
COUNT = "countTokens"
EMBED = ("embedContent", "batchEmbedContents")
SOURCE_HEADER = "X-Gateway-Token-Count"


def _split(name: str, path: str) -> tuple[str, str]:
    model, sep, method = name.partition(":")
    if not sep or not model or not method:
        raise ClientError(
            404,
            f"no such endpoint: POST {path} (the Gemini API here: models/{{model}}:generateContent, "
            ":streamGenerateContent, :countTokens)",
            type="not_found_error",
            code="unknown_url",
        )
    return model.removeprefix("models/"), method


@dataclass(frozen=True, slots=True)
class _Routed:
    """A Gemini codec with the request's path parameters and query, which `decode` takes and the
    exchange does not yet pass (its credential too: `?key=`)."""

    codec: GeminiCodec
    params: Mapping[str, str]
    query: Mapping[str, str]

    def decode(self, body: Any, headers: Mapping[str, str], sealer: Sealer, items: Any = None) -> Inbound:
        return self.codec.decode(body, headers, sealer, items, params=self.params, query=self.query)

    def credential(self, headers: Mapping[str, str]) -> str:
        return credential(headers, self.query)

    def __getattr__(self, name: str) -> Any:  # the rest is the codec's
        return getattr(self.codec, name)


async def generate(request: web.Request) -> web.StreamResponse:
    model, method = _split(request.match_info["name"], request.path)
    state: GatewayState = request.app[GatewayState.KEY]
    if method in (GENERATE_METHOD, STREAM_METHOD):
        codec = GENERATE if method == GENERATE_METHOD else STREAM
        routed = _Routed(codec, {"model": model}, request.query)
        return await run_exchange(state, routed, request)  # type: ignore[arg-type]
    if method == COUNT:
        return await _count(state, request, model)
    if method in EMBED:
        body = parse_json_body(await request.read(), state.config.server.max_json_depth)
        status, payload, provider = await embed(state.engine, plan_for(state, model), method, body)
        return web.Response(
            status=status,
            body=payload,
            content_type="application/json",
            headers={"X-Gateway-Provider": provider},
        )
    raise ClientError(
        404,
        f"method {method!r} is not served here (generateContent, streamGenerateContent, countTokens, "
        "embedContent, batchEmbedContents)",
        type="not_found_error",
        code="unknown_method",
    )


async def _count(state: GatewayState, request: web.Request, model: str) -> web.Response:
    try:
        body = parse_json_body(await request.read(), state.config.server.max_json_depth)
        if isinstance(body, dict) and isinstance(body.get("generateContentRequest"), dict):
            body = body["generateContentRequest"]
        canonical = decode_request(body, model, False, state.sealer, Decoded())
        check_size(canonical, state.config.server)
        plan = plan_for(state, model)
        tokens, source, provider = await count_input_tokens(state.engine, canonical, plan)
    except ClientError as exc:
        status, payload = google_error(exc)
        return web.Response(status=status, body=payload, headers=exc.headers, content_type="application/json")
    headers = {SOURCE_HEADER: source, "X-Gateway-Provider": provider}
    return web.json_response({"totalTokens": tokens}, headers=headers)


async def list_models(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    return web.json_response(model_list(list(state.config.models)))


async def get_model(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    name = request.match_info["name"].removeprefix("models/")
    if not is_google_client(request) and request.path.startswith("/v1/"):  # OpenAI's models.retrieve
        if name in state.config.models:
            return web.json_response({"id": name, "object": "model", "created": 0, "owned_by": "gateway"})
    if name not in state.config.models:
        raise ClientError(
            404, f"models/{name} is not found (not a model group of this gateway)", code="model_not_found"
        )
    return web.json_response(model_json(name))


def is_google_client(request: web.Request) -> bool:
    """`GET /v1/models` is OpenAI's list too: a Google client says who it is by its key or header."""
    headers = request.headers
    return "x-goog-api-key" in headers or "x-goog-api-client" in headers or "key" in request.query


def add_routes(app: web.Application) -> None:
    """`GET /v1/models` is the app's (every dialect's list, in the shape the client selects)."""
    for base in BASES:
        app.router.add_post(base + "/models/{name}", generate)
        app.router.add_get(base + "/models/{name}", get_model)
    app.router.add_get("/v1beta/models", list_models)
