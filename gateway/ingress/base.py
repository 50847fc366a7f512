"""The contract every ingress dialect implements: a codec between one client wire format and the
canonical transcript, and the dialect's record (`Dialect`: its routes, `ingress` label, error
envelope and models-list shape; client credentials are read for every dialect alike, in
gateway/security.py). A codec knows nothing of routing, the store or
providers; the exchange (gateway/exchange.py) runs every dialect's requests through one pipeline.

Adding a dialect is a package with its codec and its `Dialect` record, and one line in
gateway/ingress/dialects.py (README "Architecture").
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from msgspec import Struct

from gateway.ingress.errors import ClientError
from gateway.ingress.memo import Items
from gateway.ingress.typed_items import TypedItems
from gateway.transcript.events import BlockKind, Event, UpstreamError
from gateway.transcript.model import AssistantTurn, Block, Continuity, Request
from gateway.transcript.seal import Sealer


# built for every request: msgspec Structs cost a fifth of a frozen dataclass's init (each field
# of which is an `object.__setattr__`)
class SessionHint(Struct, frozen=True, gc=False):
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
class ItemRef:
    """An output item of an earlier kept answer that the request names by its id instead of
    sending it (a Responses `item_reference`): the exchange puts the blocks kept under that id in
    its place (gateway/continuity/items.py)."""

    id: str
    param: str  # where the request named it (errors name it)
    message: int  # the index in `Request.messages` of the assistant message it belongs to
    block: int  # its blocks go before that message's block at this index


class Inbound(Struct, frozen=True):
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
    # items named by id, in request order: the assistant messages they belong to hold the rest
    references: tuple[ItemRef, ...] = ()


class Reply(Struct, frozen=True, gc=False):
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


NO_PARAMS: Mapping[str, str] = MappingProxyType({})
# an answer's items by the id the client got for each: (item id, the blocks it was made of)
KeptItems = tuple[tuple[str, tuple[Block, ...]], ...]


class IngressCodec(Protocol):
    # the top-level field holding the transcript's items, when the codec decodes each through
    # `Items` (gateway/ingress/memo.py: decoded once per their bytes); None: the body is decoded
    # whole every time
    transcript_field: str | None
    # that list read by msgspec into the dialect's typed items at first sight of a long
    # transcript (gateway/ingress/typed_items.py); None: parsed by orjson
    typed_items: TypedItems | None

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
        """Raise ClientError (400, with the JSON path) for anything invalid. `items`: what the
        memo found of `body[transcript_field]` (None: decode every item). `params`: the route's
        path parameters (`{model}` in its pattern); `query`: the URL's query parameters."""
        ...

    def answer_id(self, request_id: str) -> str: ...

    def stream_encoder(self, inbound: Inbound, reply: Reply, sealer: Sealer) -> StreamEncoder: ...

    def answer(self, inbound: Inbound, reply: Reply, turn: AssistantTurn, sealer: Sealer) -> bytes:
        """The non-streamed answer: a fold of the same events the stream encoder takes."""
        ...

    def kept_items(self, inbound: Inbound, reply: Reply, turn: AssistantTurn) -> KeptItems:
        """For an answer kept under its id (`inbound.keep`): the ids the client got for the
        answer's items, each with the blocks it was made of, so a later request can name an item
        by its id (`ItemRef`). `turn` is the answer as the client saw it. () for a dialect whose
        clients cannot name items."""
        ...

    def continuity_token(self, kind: BlockKind, meta: Continuity, sealer: Sealer) -> str:
        """The token a client of this dialect sends back, in its history, for a block of `kind`
        that carries `meta` (the NDJSON stream's `thinking_signature`): the provider's own where
        the dialect carries that issuer's token natively, the gateway's sealed token otherwise."""
        ...


# (status, body) of an error in a dialect's envelope
ErrorEnvelope = Callable[[ClientError], tuple[int, bytes]]


@dataclass(frozen=True, slots=True)
class Route:
    """A POST route of a dialect: an aiohttp path pattern (`{name}` segments are the `params` its
    codec's `decode` receives, e.g. "/v1beta/models/{model}:streamGenerateContent") and the codec
    answering it."""

    path: str
    codec: IngressCodec


@dataclass(frozen=True, slots=True)
class ModelsList:
    """`GET <path>`: the model groups in the dialect's list shape. Dialects listing on one path
    are told apart by `selects` (the request's headers and query); the one without it is that path's
    default."""

    path: str
    render: Callable[[Sequence[str]], Any]  # model group names -> the JSON body
    # (headers, query) -> whether the request is this dialect's client
    selects: Callable[[Mapping[str, str], Mapping[str, str]], bool] | None = None


@functools.lru_cache(maxsize=64)
def _path_regex(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^}]*\}", pattern)
    return re.compile("[^/]+".join(re.escape(p) for p in parts) + "(?:/.*)?", re.DOTALL)


@dataclass(frozen=True, slots=True)
class CountRoute:
    """`POST <path>` (a pattern, as a Route's): the request's input tokens, counted by the routed
    provider where its family can count (else estimated), without generating anything."""

    path: str
    # (body, headers, sealer, *, params, query) -> Inbound: the dialect's counting request decoded
    decode: Callable[..., Inbound]
    render: Callable[[int], Any]  # the count -> the JSON body
    ingress: str  # its own `ingress` label: counting requests are not the dialect's requests

    def covers(self, path: str) -> bool:
        """Whether `path` is this route's or under it (its `{name}` segments stand for any text
        but "/"): a request refused before the handler counts under the route's label too."""
        return _path_regex(self.path).fullmatch(path) is not None


@dataclass(frozen=True, slots=True)
class Dialect:
    """One client dialect, everything the gateway knows of it. The registry
    (gateway/ingress/dialects.py) lists the records; the app's routes, the errors answered outside
    a handler (gateway/http_errors.py), the client authentication (gateway/security.py) and the
    exchange take them from there."""

    ingress: str  # the `ingress` label of the metrics and the access log
    routes: tuple[Route, ...]
    # the paths whose errors (404, 401, 413...) are answered in this envelope: each path itself and
    # every path under it ("/v1/messages" covers "/v1/messages/count_tokens"); one ending in "/"
    # covers only the paths under it ("/v1/models/" is Gemini's, "/v1/models" itself is not)
    prefixes: tuple[str, ...]
    error: ErrorEnvelope
    models: ModelsList | None = None
    count: CountRoute | None = None

    def owns(self, path: str) -> bool:
        for prefix in self.prefixes:
            if path.startswith(prefix) and (
                len(path) == len(prefix) or prefix[-1] == "/" or path[len(prefix)] == "/"
            ):
                return True
        return False
