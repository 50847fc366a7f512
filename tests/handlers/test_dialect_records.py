"""Registering a dialect is one record: its routes (path patterns), label, envelope, credential and
models list come from the record alone, and its codec's `decode` receives the route's path
parameters and the query (as a Gemini-style API carries the model and the stream flag in the URL).
Also: the models list picks its shape by the record that selects the request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import orjson
import pytest

import gateway.app
from gateway.ingress.base import NO_PARAMS, Dialect, Inbound, ModelsList, Route
from gateway.ingress.chat.codec import CODEC as CHAT
from gateway.ingress.chat.codec import openai_error
from gateway.ingress.dialects import DIALECTS
from gateway.ingress.memo import Items
from gateway.simulators.base import Reply, SimulatorHub
from gateway.transcript.seal import Sealer
from tests.e2e.gateway_stack import config_with, serve


class ModelInPath:
    """Chat Completions bodies whose model and stream flag are in the URL instead."""

    transcript_field = None

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, str], dict[str, str]]] = []

    def decode(
        self,
        body: Any,
        headers: Mapping[str, str],
        sealer: Sealer,
        items: Items[Any] | None = None,
        *,
        params: Mapping[str, str] = NO_PARAMS,
        query: Mapping[str, str] = NO_PARAMS,
    ) -> Inbound:
        self.seen.append((dict(params), dict(query)))
        body = {**body, "model": params["model"], "stream": query.get("alt") == "sse"}
        return CHAT.decode(body, headers, sealer)

    def __getattr__(self, name: str) -> Any:  # the rest of the codec is Chat's
        return getattr(CHAT, name)


def names_only(names: Sequence[str]) -> dict[str, Any]:
    return {"models": [{"name": f"models/{n}"} for n in names]}


def path_dialect(codec: ModelInPath) -> Dialect:
    return Dialect(
        ingress="model_in_path",
        routes=(Route("/vtest/models/{model}:generate", codec),),
        prefixes=("/vtest",),
        error=openai_error,
        models=ModelsList("/vtest/models", names_only),
    )


@pytest.fixture
async def hub():
    async with SimulatorHub() as hub:
        yield hub


async def test_a_registered_dialect_is_routed_and_its_decode_gets_the_path_and_query(hub, monkeypatch):
    codec = ModelInPath()
    monkeypatch.setattr(gateway.app, "DIALECTS", (*DIALECTS, path_dialect(codec)))
    hub.states["openai_chat"].push(Reply(text="Hi from the path."))
    async with serve(hub, config_with(hub)) as gw, aiohttp.ClientSession() as client:
        body = {"messages": [{"role": "user", "content": "Hello?"}]}
        url = f"{gw.url}/vtest/models/openai-chat:generate"
        json_type = {"Content-Type": "application/json"}
        async with client.post(
            url, params={"alt": "json"}, data=orjson.dumps(body), headers=json_type
        ) as resp:
            assert resp.status == 200, await resp.text()
            answer = await resp.json()
        assert answer["choices"][0]["message"]["content"] == "Hi from the path."
        assert codec.seen == [({"model": "openai-chat"}, {"alt": "json"})]
        assert (
            gw.sample(
                "gateway_requests_total",
                ingress="model_in_path",
                model="openai-chat",
                provider="openai-chat",
                outcome="ok",
            )
            == 1
        )

        async with client.get(f"{gw.url}/vtest/models") as resp:
            listed = await resp.json()
        assert {"name": "models/openai-chat"} in listed["models"]


async def test_the_shared_models_path_answers_in_the_shape_the_request_selects(hub):
    async with serve(hub, config_with(hub)) as gw, aiohttp.ClientSession() as client:
        async with client.get(f"{gw.url}/v1/models") as resp:
            openai_list = await resp.json()
        async with client.get(f"{gw.url}/v1/models", headers={"anthropic-version": "2023-06-01"}) as resp:
            anthropic_list = await resp.json()
    assert openai_list["object"] == "list" and openai_list["data"][0]["object"] == "model"
    assert anthropic_list["data"][0]["type"] == "model" and "has_more" in anthropic_list
