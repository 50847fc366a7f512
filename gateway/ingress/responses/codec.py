"""The OpenAI Responses dialect (`POST /v1/responses`, `POST /v1/responses/compact`) as an
ingress codec: Codex CLI, the OpenAI Agents SDK, and the `openai` SDK's `responses` API.

Stateless clients (Codex: `store: false`, the whole transcript every turn) carry continuity in
`encrypted_content` (gateway/ingress/responses/tokens.py); stateful ones name an earlier answer
with `previous_response_id`, which the exchange rebuilds from what it kept (`Inbound.keep`).
A request whose input ends in a `compaction_trigger` item, or any request to
/v1/responses/compact, is answered with exactly one `compaction` item: the routed model's
summary of the input, sealed, which later requests put back in place of the compacted turns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.ingress.base import (
    NO_PARAMS,
    Dialect,
    Inbound,
    KeptItems,
    ModelsList,
    Reply,
    Route,
    StreamEncoder,
)
from gateway.ingress.chat.codec import openai_error
from gateway.ingress.chat.models import openai_model_list
from gateway.ingress.memo import Items
from gateway.ingress.responses.decode import TYPED_TOOLS, decode_request
from gateway.ingress.responses.output import (
    ERROR_FINISH,
    Answering,
    base_of,
    carrier_id,
    compaction_item,
    item_blocks,
    output_items,
    response_json,
    status_of,
    usage_json,
)
from gateway.ingress.responses.stream import ResponsesStreamEncoder
from gateway.ingress.responses.tokens import reasoning_token
from gateway.ingress.textual import ServerToolsAsText, textual_turn
from gateway.transcript.events import BlockKind
from gateway.transcript.model import AssistantTurn, Continuity, Text
from gateway.transcript.seal import Sealer
from gateway.wire.openai_server import KIND as OPENAI_RESPONSES


class ResponsesCodec:
    def __init__(self, compact: bool = False) -> None:
        self.compact = compact  # the /v1/responses/compact endpoint

    # a reasoning item, a message and a call that follows it make one assistant turn together, so
    # an item alone is not a unit to decode: the memo keeps a witness per item, and the reading of
    # the items resumes after those the conversation's last turn read (gateway/ingress/resumed.py)
    transcript_field = "input"
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
        decoded = decode_request(body, headers, sealer, compact=self.compact, found=items)
        return Inbound(
            decoded.request,
            decoded.session,
            decoded.ignored_tokens,
            context=decoded.answering,
            history=decoded.history,
            keep=decoded.keep,
            references=decoded.references,
        )

    def answer_id(self, request_id: str) -> str:
        return "resp_" + request_id

    def kept_items(self, inbound: Inbound, reply: Reply, turn: AssistantTurn) -> KeptItems:
        answering: Answering = inbound.context
        if answering.compaction:
            return ()
        base = base_of(reply.id)
        items = item_blocks(textual_turn(turn, OPENAI_RESPONSES).blocks, base)
        if answering.encrypted:  # its data rides on the turn's blocks: naming it adds nothing
            items.append((carrier_id(base), ()))
        return tuple(items)

    # OpenAI's own web/file search items and annotations go out as OpenAI sent them; another
    # family's server tools and citations as text
    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> StreamEncoder:
        encoder = ResponsesStreamEncoder(inbound.context, reply.id, reply.created, sealer)
        return ServerToolsAsText(encoder, OPENAI_RESPONSES)

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        turn = textual_turn(turn, OPENAI_RESPONSES)
        answering: Answering = inbound.context
        base = base_of(reply.id)
        status, incomplete = status_of(turn.stop_reason)
        if answering.compaction:
            summary = "".join(b.text for b in turn.blocks if type(b) is Text)
            output = [compaction_item(base, summary, sealer)]
            if self.compact:
                body = {
                    "id": reply.id,
                    "object": "response.compaction",
                    "created_at": reply.created,
                    "output": output,
                    "usage": usage_json(turn.usage),
                }
                return orjson.dumps(body)
        else:
            message_status = "incomplete" if status == "incomplete" else "completed"
            output = output_items(turn.blocks, base, answering, sealer, message_status)
        error = ERROR_FINISH if status == "failed" else None
        return orjson.dumps(
            response_json(
                answering,
                reply.id,
                reply.created,
                status,
                output,
                turn.usage,
                incomplete=incomplete,
                error=error,
            )
        )

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        # a Responses client sends back OpenAI's own reasoning token as OpenAI issued it; every
        # other token (and text/call continuity, carried in the turn's carrier) sealed
        if kind is BlockKind.REASONING:
            token = reasoning_token(meta, sealer)
            if token is not None:
                return token
        return sealer.seal(meta)


CODEC = ResponsesCodec()
COMPACT_CODEC = ResponsesCodec(compact=True)
DIALECT = Dialect(
    ingress="responses",
    routes=(Route("/v1/responses", CODEC), Route("/v1/responses/compact", COMPACT_CODEC)),
    prefixes=("/v1/responses",),
    error=openai_error,
    models=ModelsList("/v1/models", openai_model_list),
)
