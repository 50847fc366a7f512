"""The Gemini API dialect as an ingress codec. Its URL carries what other dialects put in the body
(`/v1beta/models/{model}:streamGenerateContent?alt=sse`): `decode` takes the model from the
route's path parameters and the framing of a stream (`alt=sse`, else one JSON array) from the
query; the answer's encoders find the framing in the decoded request's context."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from gateway.ingress.base import Inbound, Reply
from gateway.ingress.errors import ClientError
from gateway.ingress.gemini.decode import Decoded, decode_request
from gateway.ingress.gemini.encode import AnswerParts, GeminiStreamEncoder, answer_json, continuity_token
from gateway.ingress.gemini.errors import google_error
from gateway.ingress.memo import Items
from gateway.transcript.events import BlockKind
from gateway.transcript.model import AssistantTurn, Continuity
from gateway.transcript.seal import Sealer

INGRESS = "gemini"
NO_PARAMS: Mapping[str, str] = MappingProxyType({})


def credential(headers: Mapping[str, str], query: Mapping[str, str] = NO_PARAMS) -> str:
    """The gateway token as a Google client sends it: `x-goog-api-key` (the SDKs, Gemini CLI),
    `?key=` (REST samples), or a bearer token."""
    key = headers.get("x-goog-api-key", "").strip() or query.get("key", "").strip()
    if key:
        return key
    scheme, _, value = headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


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
    transcript_field = None

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
        request = decode_request(body, model_of(params), self.stream, sealer, out)
        context = Context(out.include_thoughts, query.get("alt") == "sse")
        return Inbound(request, None, out.ignored_tokens, context=context)

    def answer_id(self, request_id: str) -> str:
        return request_id

    def _parts(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> AnswerParts:
        return AnswerParts(reply.id, reply.model, inbound.context.include_thoughts, sealer)

    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> GeminiStreamEncoder:
        return GeminiStreamEncoder(self._parts(inbound, reply, sealer), inbound.context.sse)

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        return orjson.dumps(answer_json(self._parts(inbound, reply, sealer), turn))

    def error_body(self, error: ClientError) -> tuple[int, bytes]:
        return google_error(error)

    def credential(self, headers: Mapping[str, str]) -> str:
        return credential(headers)

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        return continuity_token(meta, sealer)


GENERATE = GeminiCodec(stream=False)
STREAM = GeminiCodec(stream=True)
