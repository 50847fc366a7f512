"""The contract every ingress dialect implements: a codec between one client wire format and the
canonical transcript. A codec knows nothing of routing, the store or providers; the exchange
(gateway/exchange.py) runs every dialect's requests through one pipeline.

Adding a dialect is a module with an `IngressCodec` and one route line in app.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.ingress.errors import ClientError
from gateway.ingress.memo import Items
from gateway.transcript.events import BlockKind, Event, UpstreamError
from gateway.transcript.model import AssistantTurn, Continuity, Request
from gateway.transcript.seal import Sealer


@dataclass(frozen=True, slots=True)
class SessionHint:
    """A session key the client named, and where it came from (the error names it when invalid)."""

    source: str  # e.g. the header "X-Session-Id"
    value: str


@dataclass(frozen=True, slots=True)
class HistoryRef:
    """An earlier answer the gateway kept (`Inbound.keep`) that this request continues: the
    exchange puts that answer's transcript before the request's messages."""

    source: str  # the field that named it, e.g. "previous_response_id" (errors name it)
    id: str  # the answer's id as the client got it (`Reply.id`)
    not_found_code: str = "history_not_found"  # the error code when nothing is kept under `id`


@dataclass(frozen=True, slots=True)
class Inbound:
    """A decoded client request: the canonical transcript plus what answering it needs."""

    request: Request
    session_hint: SessionHint | None = None
    ignored_tokens: int = 0  # echoed continuity tokens that did not parse (never forwarded)
    # dialect state the codec wants back when it answers (opaque to the exchange)
    context: Any = None
    history: HistoryRef | None = None
    # keep the answer with its whole transcript (history included) under the answer's id, for the
    # store's TTL, so a later request can continue it by that id
    keep: bool = False


@dataclass(frozen=True, slots=True)
class Reply:
    """What every answer carries, whatever the dialect."""

    id: str  # the answer's id in the dialect's form
    model: str  # the model name the client asked for
    created: int  # unix seconds


class StreamEncoder(Protocol):
    """Per-answer state machine: canonical events in, the dialect's stream bytes out."""

    content_type: str
    # seconds without upstream bytes after which `keepalive()` is written; None: never
    keepalive_seconds: float | None

    def start(self) -> bytes: ...

    def event(self, event: Event) -> bytes | None: ...

    def finish(self) -> bytes:
        """The end of a complete answer."""
        ...

    def error(self, error: UpstreamError) -> bytes:
        """The well-formed end of an answer that failed after the first byte."""
        ...

    def keepalive(self) -> bytes: ...


class IngressCodec(Protocol):
    ingress: str  # the `ingress` label of the metrics
    # the top-level field holding the transcript's items, when the codec decodes each through
    # `Items` (gateway/ingress/memo.py: decoded once per their bytes); None: the body is decoded
    # whole every time
    transcript_field: str | None

    def decode(
        self, body: Any, headers: Mapping[str, str], sealer: Sealer, items: Items[Any] | None = None
    ) -> Inbound:
        """Raise ClientError (400, with the JSON path) for anything invalid. `items`: what the
        memo found of `body[transcript_field]` (None: decode every item)."""
        ...

    def answer_id(self, request_id: str) -> str: ...

    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> StreamEncoder: ...

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        """The non-streamed answer: a fold of the same events the stream encoder takes."""
        ...

    def error_body(self, error: ClientError) -> tuple[int, bytes]:
        """(status, body) of an error in the dialect's envelope."""
        ...

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        """The token a client of this dialect sends back, in its history, for a block of `kind`
        that carries `meta` (the NDJSON stream's `thinking_signature`): the provider's own where
        the dialect carries that issuer's token natively, the gateway's sealed token otherwise."""
        ...
