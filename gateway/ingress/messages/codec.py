"""The Anthropic Messages dialect (`POST /v1/messages`) as an ingress codec: Claude Code and every
app on the Anthropic SDKs (`ANTHROPIC_BASE_URL` at the gateway)."""

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
    SessionHint,
)
from gateway.ingress.echo_formats import anthropic_token
from gateway.ingress.errors import anthropic_error
from gateway.ingress.memo import Items
from gateway.ingress.messages import wire as w
from gateway.ingress.messages.decode import TYPED_TOOLS, Decoded, Validated, decode_request, validate
from gateway.ingress.messages.encode import MessageEvents, MessagesStreamEncoder
from gateway.ingress.messages.fold import message_json
from gateway.ingress.messages.models import anthropic_client, anthropic_model_list
from gateway.transcript.events import BlockKind
from gateway.transcript.model import AssistantTurn, Continuity
from gateway.transcript.seal import Sealer

# a client-chosen session key, then the one Claude Code sends on every request of a session
SESSION_HEADERS = ("X-Session-Id", "X-Claude-Code-Session-Id")


@dataclass(frozen=True, slots=True)
class Context:
    omit_thinking: bool  # thinking.display "omitted"


class MessagesCodec:
    transcript_field = "messages"
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
        return self._decode(validate(body, items=items), headers, sealer)

    def decode_count(
        self,
        body: Any,
        headers: Mapping[str, str],
        sealer: Sealer,
        *,
        params: Mapping[str, str] = NO_PARAMS,
        query: Mapping[str, str] = NO_PARAMS,
    ) -> Inbound:
        """A `count_tokens` request: the Messages request without `max_tokens`."""
        return self._decode(validate(body, w.CountTokensRequest), headers, sealer)

    def _decode(self, validated: Validated, headers: Mapping[str, str], sealer: Sealer) -> Inbound:
        out = Decoded()
        request = decode_request(validated, headers, sealer, out)
        hint = None
        for name in SESSION_HEADERS:
            value = headers.get(name)
            if value:
                hint = SessionHint(name, value)
                break
        return Inbound(request, hint, out.ignored_tokens, context=Context(out.display_omitted))

    def answer_id(self, request_id: str) -> str:
        return "msg_" + request_id

    def kept_items(self, inbound: Inbound, reply: Reply, turn: AssistantTurn) -> KeptItems:
        return ()  # the dialect's clients name no items of an answer

    def _events(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> MessageEvents:
        return MessageEvents(reply.id, reply.model, inbound.request, inbound.context.omit_thinking, sealer)

    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(self._events(inbound, reply, sealer))

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        return orjson.dumps(message_json(self._events(inbound, reply, sealer), turn))

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        # Anthropic's own thinking signature (or redacted data) as Anthropic issued it, so the
        # history replays natively; every other token sealed, as the thinking blocks carry it
        if kind is BlockKind.REASONING:
            token = anthropic_token(meta)
            if token is not None:
                return token[1]
        return sealer.seal(meta)


def input_tokens(tokens: int) -> dict[str, int]:
    """`count_tokens`' answer."""
    return {"input_tokens": tokens}


CODEC = MessagesCodec()
DIALECT = Dialect(
    ingress="anthropic_messages",
    routes=(Route("/v1/messages", CODEC),),
    prefixes=("/v1/messages",),  # /v1/messages/count_tokens too
    error=anthropic_error,
    models=ModelsList("/v1/models", anthropic_model_list, selects=anthropic_client),
    count=CountRoute(
        "/v1/messages/count_tokens",
        CODEC.decode_count,
        input_tokens,
        ingress="anthropic_count_tokens",
    ),
)
