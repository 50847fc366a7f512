"""What the inspector keeps of each request: references to what the exchange made anyway (the
body as received, the decoded and restored transcripts, each attempt's repaired transcript and
sent body, the answer), in a ring bounded in bytes. Nothing is serialized here: the API does it
when someone asks (gateway/inspector/views.py). Never written anywhere but memory.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from msgspec import Struct

from gateway.bounded_cache import BoundedCache
from gateway.repair.report import Repair
from gateway.routing.answer import Attempt
from gateway.transcript.model import AssistantTurn, Reasoning, Request, Text, ToolCall, Usage

if TYPE_CHECKING:
    from gateway.exchange import Exchange

# the client's headers worth seeing; never a credential (Authorization, x-api-key, cookies)
CLIENT_HEADERS = (
    "content-type",
    "accept",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "x-session-id",
    "x-claude-code-session-id",
    "session-id",
)
# what one entry holds beside its bytes: the record, the attempts, the small objects a request
# makes (measured: about 7 KiB of RSS per capture of a one-message chat request)
ENTRY_OVERHEAD = 6144
# the client body counts this many times: the body, and the transcript objects decoded from it
# (about twice the JSON's size; the bench's RSS with and without the inspector agrees)
DECODED = 3


class Capture(Struct):
    """One request's capture. A Struct: made for every request, by keyword, its 26 fields set in C
    (a slotted dataclass's generated `__init__` took ~4 us more a capture)."""

    id: str
    time: float  # wall clock, seconds
    ingress: str
    tenant: str
    session: str
    model: str
    status: int
    outcome: str
    duration: float
    ttft: float | None
    usage: Usage | None
    headers: Mapping[str, str]
    raw: bytes
    received: Request | None
    routed: Request | None
    ignored_tokens: int
    restored: tuple[Repair, ...]
    repairs: tuple[Repair, ...]  # the committed target's
    attempts: tuple[Attempt, ...]
    started: float  # time.monotonic() at the start (attempt times are relative to it)
    provider: str
    upstream_model: str
    affinity_break: str | None
    turn: AssistantTurn | None
    error: str
    size: int

    def repair_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for repair in (*self.restored, *self.repairs):
            counts[repair.kind] = counts.get(repair.kind, 0) + 1
        return counts


def capture_of(
    exchange: Exchange, headers: Mapping[str, str], ended: float | None = None, wall: float | None = None
) -> Capture:
    """`ended`: the request's end on the monotonic clock and `wall` on the wall clock, when it is
    captured later (default: now)."""
    answer = exchange.answer
    attempts = answer.attempts if answer is not None else exchange.attempts
    turn = exchange.turn
    size = ENTRY_OVERHEAD + DECODED * len(exchange.raw) + sum(len(a.sent) for a in attempts)
    if turn is not None:
        size += turn_size(turn)
    return Capture(
        id=exchange.request_id,
        time=time.time() if wall is None else wall,
        ingress=exchange.dialect.ingress,
        tenant=exchange.tenant,
        session=exchange.session,
        model=exchange.model,
        status=exchange.status,
        outcome=exchange.outcome,
        duration=(time.monotonic() if ended is None else ended) - exchange.started,
        ttft=exchange.ttft,
        usage=exchange.usage,
        headers=_shown(headers),
        raw=exchange.raw,
        received=exchange.received,
        routed=exchange.routed,
        ignored_tokens=exchange.ignored_tokens,
        restored=exchange.restored,
        repairs=answer.repairs if answer is not None else (),
        attempts=attempts,
        started=exchange.started,
        provider=answer.target.provider if answer is not None else "",
        upstream_model=answer.target.model if answer is not None else "",
        affinity_break=answer.affinity_break if answer is not None else None,
        turn=turn,
        error=exchange.error,
        size=size,
    )


def _shown(headers: Mapping[str, str]) -> Mapping[str, str]:
    """The client headers a capture shows (`CLIENT_HEADERS`, in that order), one read-only mapping
    per distinct set: a client sends the same ones request after request, and a capture keeps its
    own alive for as long as the ring holds it (each object kept costs every request some CPU)."""
    shown = tuple((name, headers[name]) for name in CLIENT_HEADERS if name in headers)
    found = _HEADER_SETS.get(shown)
    if found is None:
        found = _HEADER_SETS.keep(shown, MappingProxyType(dict(shown)))
    return found


# values are the client's: bounded
_HEADER_SETS: BoundedCache[tuple[tuple[str, str], ...], Mapping[str, str]] = BoundedCache(1024)


def turn_size(turn: AssistantTurn) -> int:
    size = 0
    for block in turn.blocks:
        t = type(block)
        if t is Text or t is Reasoning:
            size += len(block.text)
        elif t is ToolCall:
            size += len(block.arguments) + len(block.name)
    return size


class Ring:
    """The newest captures whose sizes add up to at most `max_bytes`; the oldest go first."""

    __slots__ = ("max_bytes", "bytes", "_entries", "_by_id", "evicted")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.evicted = 0
        self._entries: deque[Capture] = deque()
        self._by_id: dict[str, Capture] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, capture: Capture) -> bool:
        """False when the capture alone is larger than the ring (it is not kept)."""
        if capture.size > self.max_bytes:
            self.evicted += 1
            return False
        entries, by_id = self._entries, self._by_id
        entries.append(capture)
        by_id[capture.id] = capture
        self.bytes += capture.size
        while self.bytes > self.max_bytes:
            old = entries.popleft()
            del by_id[old.id]
            self.bytes -= old.size
            self.evicted += 1
        return True

    def get(self, capture_id: str) -> Capture | None:
        return self._by_id.get(capture_id)

    def newest(self, keep: Callable[[Capture], bool], limit: int) -> list[Capture]:
        found: list[Capture] = []
        for capture in reversed(self._entries):
            if keep(capture):
                found.append(capture)
                if len(found) >= limit:
                    break
        return found
