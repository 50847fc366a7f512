"""What of the Gemini API its dialect records (gateway/ingress/gemini/codec.py) have no place for:
the embeddings methods (`POST {base}/models/{model}:embedContent`, `:batchEmbedContents`: not a
conversation, no transcript; served by the group's Gemini target, within a client key's model
list and request limits), models.get
(`GET {base}/models/{model}`, which under /v1 is OpenAI's models.retrieve too), and a 404 naming
the methods served for any other `POST {base}/models/...`. Registered after the records' routes,
which take generateContent, streamGenerateContent and countTokens first."""

from __future__ import annotations

from aiohttp import web

from gateway.exchange import plan_for
from gateway.ingress.admission import parse_within_budget
from gateway.ingress.errors import ClientError
from gateway.ingress.gemini.codec import BASES, google_client
from gateway.ingress.gemini.models import model_json
from gateway.routing.embed import embed
from gateway.state import TENANT, GatewayState

EMBED = ("embedContent", "batchEmbedContents")
SERVED = "generateContent, streamGenerateContent, countTokens, embedContent, batchEmbedContents"


def _split(name: str, path: str) -> tuple[str, str]:
    model, sep, method = name.partition(":")
    if not sep or not model or not method:
        raise ClientError(
            404,
            f"no such endpoint: POST {path} (the Gemini API here: models/{{model}}:{{method}}, the methods "
            f"{SERVED})",
            type="not_found_error",
            code="unknown_url",
        )
    return model.removeprefix("models/"), method


async def other_method(request: web.Request) -> web.Response:
    model, method = _split(request.match_info["name"], request.path)
    if method not in EMBED:
        raise ClientError(
            404,
            f"method {method!r} is not served here ({SERVED})",
            type="not_found_error",
            code="unknown_method",
        )
    state: GatewayState = request.app[GatewayState.KEY]
    body = await parse_within_budget(await request.read(), state.config.server)
    plan = plan_for(state, model)
    if state.limits:  # a key's model list and request limits hold here as for a conversation
        refusal = await state.limits.admit(state.limits.identify(request.get(TENANT, "")), plan.model)
        if refusal is not None:
            raise refusal.error()
    status, payload, provider = await embed(state.engine, plan, method, body)
    return web.Response(
        status=status, body=payload, content_type="application/json", headers={"X-Gateway-Provider": provider}
    )


async def get_model(request: web.Request) -> web.Response:
    state: GatewayState = request.app[GatewayState.KEY]
    name = request.match_info["name"].removeprefix("models/")
    openai = request.path.startswith("/v1/") and not google_client(request.headers, request.query)
    if openai and name in state.config.models:  # OpenAI's models.retrieve
        return web.json_response({"id": name, "object": "model", "created": 0, "owned_by": "gateway"})
    if name not in state.config.models:
        raise ClientError(
            404, f"models/{name} is not found (not a model group of this gateway)", code="model_not_found"
        )
    return web.json_response(model_json(name))


def routes() -> list[web.RouteDef]:
    found: list[web.RouteDef] = []
    for base in BASES:
        found.append(web.post(base + "/models/{name}", other_method))
        # a model's name has no ":": GET of a method's path is that method's 405, not models.get
        found.append(web.get(base + "/models/{name:[^/:]+}", get_model))
    return found
