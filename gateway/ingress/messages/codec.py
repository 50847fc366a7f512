"""The Anthropic Messages dialect (`POST /v1/messages`) as an ingress codec: Claude Code and every
app on the Anthropic SDKs (`ANTHROPIC_BASE_URL` at the gateway)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.ingress.base import Inbound, Reply, SessionHint
from gateway.ingress.echo_formats import anthropic_token
from gateway.ingress.errors import ClientError, anthropic_error
from gateway.ingress.memo import Items
from gateway.ingress.messages import wire as w
from gateway.ingress.messages.decode import Decoded, Validated, decode_request, validate
from gateway.ingress.messages.encode import MessageEvents, MessagesStreamEncoder, message_json
from gateway.transcript.events import BlockKind
from gateway.transcript.model import AssistantTurn, Continuity
from gateway.transcript.seal import Sealer

# a client-chosen session key, then the one Claude Code sends on every request of a session
SESSION_HEADERS = ("X-Session-Id", "X-Claude-Code-Session-Id")


@dataclass(frozen=True, slots=True)
class Context:
    omit_thinking: bool  # thinking.display "omitted"


class MessagesCodec:
    ingress = "anthropic_messages"
    transcript_field = "messages"

    def decode(
        self, body: Any, headers: Mapping[str, str], sealer: Sealer, items: Items[Any] | None = None
    ) -> Inbound:
        return self._decode(validate(body, items=items), headers, sealer)

    def decode_count(self, body: Any, headers: Mapping[str, str], sealer: Sealer) -> Inbound:
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

    def _events(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> MessageEvents:
        return MessageEvents(reply.id, reply.model, inbound.request, inbound.context.omit_thinking, sealer)

    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(self._events(inbound, reply, sealer))

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        return orjson.dumps(message_json(self._events(inbound, reply, sealer), turn))

    def error_body(self, error: ClientError) -> tuple[int, bytes]:
        return anthropic_error(error)

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        # Anthropic's own thinking signature (or redacted data) as Anthropic issued it, so the
        # history replays natively; every other token sealed, as the thinking blocks carry it
        if kind is BlockKind.REASONING:
            token = anthropic_token(meta)
            if token is not None:
                return token[1]
        return sealer.seal(meta)


CODEC = MessagesCodec()
