"""The OpenAI Chat Completions dialect (`POST /v1/chat/completions`) as an ingress codec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.ingress.base import (
    NO_PARAMS,
    Dialect,
    Inbound,
    KeptItems,
    ModelsList,
    Reply,
    Route,
    SessionHint,
    StreamEncoder,
)
from gateway.ingress.chat.decode import TYPED_WITH_TOOLS, DecodeStats, decode_request, include_usage
from gateway.ingress.chat.encode import ChatStreamEncoder, completion_json
from gateway.ingress.chat.models import openai_model_list
from gateway.ingress.errors import ClientError, openai_error_body
from gateway.ingress.memo import Items
from gateway.ingress.textual import ServerToolsAsText, textual_turn
from gateway.transcript.events import BlockKind
from gateway.transcript.model import AssistantTurn, Continuity
from gateway.transcript.seal import Sealer

SESSION_HEADER = "X-Session-Id"


class ChatCodec:
    transcript_field = "messages"
    typed_items = TYPED_WITH_TOOLS

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
        stats = DecodeStats()
        request = decode_request(body, sealer, stats, items)
        session = headers.get(SESSION_HEADER)
        return Inbound(
            request,
            SessionHint(SESSION_HEADER, session) if session else None,
            stats.ignored_tokens,
            context=include_usage(body),
        )

    def answer_id(self, request_id: str) -> str:
        return "chatcmpl-" + request_id

    def kept_items(self, inbound: Inbound, reply: Reply, turn: AssistantTurn) -> KeptItems:
        return ()  # the dialect's clients name no items of an answer

    # the dialect has no server-tool blocks: a provider's web search reaches the client as text
    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> StreamEncoder:
        return ServerToolsAsText(
            ChatStreamEncoder(reply.id, reply.model, bool(inbound.context), sealer, reply.created)
        )

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        return completion_json(textual_turn(turn), reply.id, reply.model, sealer, reply.created)

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        # Chat has no native field for any provider's token: reasoning_details carry sealed ones
        return sealer.seal(meta)


def openai_error(error: ClientError) -> tuple[int, bytes]:
    """`{"error": {"message", "type", "param", "code"}}`: Chat Completions and Responses."""
    return error.status, openai_error_body(error)


CODEC = ChatCodec()
DIALECT = Dialect(
    ingress="chat_completions",
    routes=(Route("/v1/chat/completions", CODEC),),
    prefixes=("/v1/chat/completions",),
    error=openai_error,
    models=ModelsList("/v1/models", openai_model_list),
)
