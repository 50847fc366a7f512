"""The Gemini API dialect as an ingress codec. Its URL carries what other dialects put in the body
(`/v1beta/models/{model}:streamGenerateContent?alt=sse`): `decode` takes the model from the
route's path parameters and the framing of a stream (`alt=sse`, else one JSON array) from the
query; the answer's encoders find the framing in the decoded request's context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.ingress.base import (
    NO_PARAMS,
    CountRoute,
    Dialect,
    Inbound,
    KeptItems,
    ModelsList,
    Reply,
    Route,
)
from gateway.ingress.gemini.decode import Decoded, decode_request
from gateway.ingress.gemini.encode import AnswerParts, GeminiStreamEncoder, answer_json, continuity_token
from gateway.ingress.gemini.errors import google_error
from gateway.ingress.gemini.models import model_list
from gateway.ingress.gemini.tools import TYPED_TOOLS
from gateway.ingress.memo import Items
from gateway.transcript.events import BlockKind
from gateway.transcript.model import AssistantTurn, Continuity
from gateway.transcript.seal import Sealer

INGRESS = "gemini"


def model_of(params: Mapping[str, str]) -> str:
    return params.get("model", "").removeprefix("models/")


@dataclass(frozen=True, slots=True)
class Context:
    include_thoughts: bool
    sse: bool  # `alt=sse`; a stream without it is one JSON array


@dataclass(frozen=True, slots=True)
class GeminiCodec:
    stream: bool  # streamGenerateContent

    ingress = INGRESS
    # the memo keeps a witness per content; the reading resumes after the contents the
    # conversation's last turn read (gateway/ingress/resumed.py)
    transcript_field = "contents"
    typed_items = TYPED_TOOLS

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
        out = Decoded()
        request = decode_request(body, model_of(params), self.stream, sealer, out, items)
        context = Context(out.include_thoughts, query.get("alt") == "sse")
        return Inbound(request, None, out.ignored_tokens, context=context)

    def answer_id(self, request_id: str) -> str:
        return request_id

    def kept_items(self, inbound: Inbound, reply: Reply, turn: AssistantTurn) -> KeptItems:
        return ()  # the dialect's clients name no items of an answer

    def _parts(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> AnswerParts:
        return AnswerParts(reply.id, reply.model, inbound.context.include_thoughts, sealer)

    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> GeminiStreamEncoder:
        return GeminiStreamEncoder(self._parts(inbound, reply, sealer), inbound.context.sse)

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        return orjson.dumps(answer_json(self._parts(inbound, reply, sealer), turn))

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        return continuity_token(meta, sealer)


GENERATE = GeminiCodec(stream=False)
STREAM = GeminiCodec(stream=True)
COUNT_INGRESS = "gemini_count_tokens"
BASES = ("/v1beta", "/v1")


def decode_count(
    body: Any,
    headers: Mapping[str, str],
    sealer: Sealer,
    *,
    params: Mapping[str, str] = NO_PARAMS,
    query: Mapping[str, str] = NO_PARAMS,
) -> Inbound:
    """`:countTokens` takes `contents` (with `systemInstruction`, `tools`) or a whole
    `generateContentRequest`; the count is of what generating would send."""
    if isinstance(body, dict) and isinstance(body.get("generateContentRequest"), dict):
        body = body["generateContentRequest"]
    return GENERATE.decode(body, headers, sealer, params=params, query=query)


def total_tokens(count: int) -> dict[str, int]:
    return {"totalTokens": count}


def google_client(headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """`GET /v1/models` is OpenAI's list too: a Google client says who it is by its key or header."""
    return "x-goog-api-key" in headers or "x-goog-api-client" in headers or "key" in query


def _record(base: str, prefix: str, models: ModelsList) -> Dialect:
    pattern = base + "/models/{model}:"
    return Dialect(
        ingress=INGRESS,
        routes=(
            Route(pattern + "generateContent", GENERATE),
            Route(pattern + "streamGenerateContent", STREAM),
        ),
        prefixes=(prefix,),
        error=google_error,
        models=models,
        count=CountRoute(pattern + "countTokens", decode_count, total_tokens, ingress=COUNT_INGRESS),
    )


# Google serves the same API under /v1beta (the SDKs' default, Gemini CLI) and /v1 (the SDKs'
# api_version="v1"). /v1beta is all Google's; under /v1 only what is below /v1/models is, and
# `GET /v1/models` lists in Google's shape for a Google client, OpenAI's (the default) otherwise.
V1BETA = _record("/v1beta", "/v1beta", ModelsList("/v1beta/models", model_list))
V1 = _record("/v1", "/v1/models/", ModelsList("/v1/models", model_list, selects=google_client))
