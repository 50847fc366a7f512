"""The Anthropic Messages dialect (`POST /v1/messages`) as an ingress codec: Claude Code and every
app on the Anthropic SDKs (`ANTHROPIC_BASE_URL` at the gateway)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.ingress.base import Inbound, Reply, SessionHint
from gateway.ingress.errors import ClientError
from gateway.ingress.messages import wire as w
from gateway.ingress.messages.decode import Decoded, decode_request, validate
from gateway.ingress.messages.encode import ERROR_TYPES, MessageEvents, MessagesStreamEncoder, message_json
from gateway.transcript.events import CONTEXT_OVERFLOW
from gateway.transcript.model import AssistantTurn
from gateway.transcript.seal import Sealer

# a client-chosen session key, then the one Claude Code sends on every request of a session
SESSION_HEADERS = ("X-Session-Id", "X-Claude-Code-Session-Id")
# Claude Code compacts the conversation only on this wording ("prompt is too long: N tokens > M
# maximum", whose numbers it reads)
PROMPT_TOO_LONG = "prompt is too long"
_NUMBERS = re.compile(r"\d[\d,]*")


@dataclass(frozen=True, slots=True)
class Context:
    omit_thinking: bool  # thinking.display "omitted"


class MessagesCodec:
    ingress = "anthropic_messages"

    def decode(self, body: Any, headers: Mapping[str, str], sealer: Sealer) -> Inbound:
        return self._decode(validate(body), headers, sealer)

    def decode_count(self, body: Any, headers: Mapping[str, str], sealer: Sealer) -> Inbound:
        """A `count_tokens` request: the Messages request without `max_tokens`."""
        return self._decode(validate(body, w.CountTokensRequest), headers, sealer)

    def _decode(self, wire: w.MessagesRequest, headers: Mapping[str, str], sealer: Sealer) -> Inbound:
        out = Decoded()
        request = decode_request(wire, headers, sealer, out)
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

    def credential(self, headers: Mapping[str, str]) -> str:
        key = headers.get("x-api-key", "").strip()
        if key:
            return key
        scheme, _, value = headers.get("Authorization", "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" else ""


def anthropic_error(error: ClientError) -> tuple[int, bytes]:
    """(status, body) in Anthropic's envelope `{"type": "error", "error": {"type", "message"}}`.
    Every target overloaded is 529 `overloaded_error`; a context overflow from any provider is a
    400 whose message says "prompt is too long"."""
    status, message = error.status, error.message
    if error.code == CONTEXT_OVERFLOW:
        status, message = 400, prompt_too_long(message)
    elif status == 503:
        status = 529
    kind = ERROR_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return status, orjson.dumps(body)


def prompt_too_long(message: str) -> str:
    """The wording Claude Code acts on, with the provider's own figures when it gave two (used,
    then the limit, in every provider's phrasing but OpenAI's, which names the limit first)."""
    if PROMPT_TOO_LONG in message.lower():
        return message
    numbers = [int(n.replace(",", "")) for n in _NUMBERS.findall(message)]
    numbers = [n for n in numbers if n >= 100]  # drop message indexes, status codes
    if len(numbers) >= 2:
        used, limit = max(numbers[:2]), min(numbers[:2])
        return f"{PROMPT_TOO_LONG}: {used} tokens > {limit} maximum ({message})"
    return f"{PROMPT_TOO_LONG} ({message})"


CODEC = MessagesCodec()
