"""Canonical stream events: what every provider stream decoder produces and every ingress
encoder consumes. Blocks are addressed by `index`, unique within one answer; a block starts,
receives deltas, and stops. The non-streaming path is the same events folded by the assembler.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from msgspec import Struct

from gateway.transcript.model import Citation, Continuity, ServerToolResult, StopReason, Usage


class BlockKind(str, enum.Enum):
    TEXT = "text"
    REASONING = "reasoning"
    TOOL_CALL = "tool_call"
    REFUSAL = "refusal"  # the model's refusal text (folds into Text(refusal=True))
    # a tool the provider ran itself: id and name at the start, its JSON input as deltas
    SERVER_TOOL_CALL = "server_tool_call"
    # what it returned: the whole ServerToolResult on the start (`block`), no deltas
    SERVER_TOOL_RESULT = "server_tool_result"


# The events are Structs: one is built for every upstream chunk (and a few more per answer), in C
# rather than by a dataclass's `__init__` (a BlockDelta 180 -> 65 ns). Untracked by the collector
# (gc=False): they hold strings, numbers, enums and the transcript's untracked values, never a
# cycle, and a stream's deltas no longer count towards the next young collection.
class MessageStart(Struct, gc=False):
    response_id: str = ""
    model: str = ""


class BlockStart(Struct, gc=False):
    index: int
    kind: BlockKind
    # tool calls: the provider's own id as it appeared on the wire (mapped to a canonical id
    # before a client sees it) and the function name; reasoning: the provider's own item id, when
    # its wire names reasoning items (clients of the same wire see it before the block's meta)
    id: str = ""
    name: str = ""
    custom: bool = False  # a call of a custom (freeform) tool: its deltas are raw input text
    result: ServerToolResult | None = None  # SERVER_TOOL_RESULT: the block, whole


class BlockDelta(Struct, gc=False):
    index: int
    text: str  # text, reasoning text, or a fragment of the tool call's JSON arguments


class BlockStop(Struct, gc=False):
    index: int
    meta: Continuity | None = None  # continuity token completed with the block, if any
    citations: tuple[Citation, ...] = ()  # text: what it cites, known once the block is complete


class UsageUpdate(Struct, gc=False):
    usage: Usage  # the latest cumulative usage; later updates replace earlier ones


class Finish(Struct, gc=False):
    stop_reason: StopReason


def is_first_content(event: Event) -> bool:
    """Content the client sees: a text, reasoning or argument delta with text, or the start of a
    tool call (its name). The time to first token is taken at the first one; the commit point
    (routing/attempt.py) is this or the end of an empty answer."""
    t = type(event)
    if t is BlockDelta:
        return bool(event.text)
    return t is BlockStart and event.kind is BlockKind.TOOL_CALL


class ErrorCategory(str, enum.Enum):
    INVALID_REQUEST = "invalid_request"
    CONTINUITY = "continuity"  # rejected signature / missing thought signature / reasoning_content
    PAIRING = "pairing"  # tool call / result structure rejected
    AUTH = "auth"
    PERMISSION = "permission"
    QUOTA = "quota"
    NOT_FOUND = "not_found"
    TOO_LARGE = "too_large"
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    SERVER = "server"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    PROTOCOL = "protocol"  # the upstream broke its own wire format


RETRYABLE_CATEGORIES = frozenset(
    {
        ErrorCategory.RATE_LIMIT,
        ErrorCategory.OVERLOADED,
        ErrorCategory.SERVER,
        ErrorCategory.TIMEOUT,
        ErrorCategory.CONNECTION,
    }
)


# UpstreamError.code of a context-window overflow, whichever provider reported it (each provider
# module recognises its own wording); clients that compact on it are told in their dialect's terms
CONTEXT_OVERFLOW = "context_length_exceeded"


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """A provider failure, classified by the provider module that understands its body."""

    category: ErrorCategory
    message: str
    status: int = 0  # HTTP status; 0 for in-stream and connection failures
    type: str = ""  # the provider's own error type / status string
    code: str | None = None
    retry_after: float | None = None  # seconds, from a header or a body (Gemini RetryInfo)

    @property
    def retryable(self) -> bool:
        return self.category in RETRYABLE_CATEGORIES


class StreamError(Struct, gc=False):
    error: UpstreamError


Event = Union[MessageStart, BlockStart, BlockDelta, BlockStop, UsageUpdate, Finish, StreamError]
