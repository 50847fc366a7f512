"""The canonical transcript: the one hub every ingress dialect decodes into and every provider
encodes from.

Values are frozen: repair passes build new transcripts instead of editing one, so failover can
re-run them on the same canonical input for the next target.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

NATIVE_ID = "native_id"
# scope/model of a token a client echoed in a provider's raw format (LiteLLM's thinking_blocks,
# Gemini's thought_signature): the issuer is unknown, so it is offered to any target of that kind
# and rejection recovery removes it if the provider refuses it
ANY_ISSUER = "*"


@dataclass(frozen=True, slots=True)
class Continuity:
    """Opaque continuity data (signatures, encrypted reasoning, native ids) and who issued it.

    Only the provider module of `kind` reads `data`; everybody else treats it as a sealed box that
    may be replayed solely to its issuer scope: the same `scope` (provider entry name, or the
    entry's `continuity_group`) and the same upstream `model`.

    One key of `data` is the gateway's own, the same for every kind: NATIVE_ID, the id the
    provider gave a tool call, kept so a turn returning to its issuer gets its original ids back.
    """

    provider: str  # config entry name of the provider that issued it
    scope: str  # continuity scope: the entry's continuity_group, else the entry name
    kind: str  # provider kind: anthropic, openai_responses, gemini, ...
    model: str  # upstream model that issued it
    data: Mapping[str, Any] = field(default_factory=dict)

    def valid_for(self, scope: str, model: str) -> bool:
        return (self.scope == scope or self.scope == ANY_ISSUER) and (
            self.model == model or self.model == ANY_ISSUER
        )


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    meta: Continuity | None = None  # e.g. a Gemini thoughtSignature carried on a text part


@dataclass(frozen=True, slots=True)
class Image:
    url: str  # http(s) URL or data: URL
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Model reasoning. `text` is what a person may read (may be empty for redacted or
    encrypted-only reasoning); `meta` holds the issuer's continuity token, if any."""

    text: str
    meta: Continuity | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str  # canonical id (gateway-minted for calls the gateway returned)
    name: str
    arguments: str  # raw JSON text of the arguments object
    meta: Continuity | None = None  # native id, Gemini signature, Responses item id


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str  # canonical id of the call it answers
    content: str
    is_error: bool = False
    images: tuple[Image, ...] = ()


Block = Union[Text, Image, Reasoning, ToolCall, ToolResult]


class Role(str, enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"  # carries ToolResult blocks


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    blocks: tuple[Block, ...]

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.blocks if type(b) is ToolCall)

    def text(self) -> str:
        return "".join(b.text for b in self.blocks if type(b) is Text)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolChoiceMode(str, enum.Enum):
    AUTO = "auto"
    NONE = "none"
    REQUIRED = "required"
    TOOL = "tool"  # exactly the named tool


@dataclass(frozen=True, slots=True)
class ToolChoice:
    mode: ToolChoiceMode
    name: str | None = None


REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


@dataclass(frozen=True, slots=True)
class Request:
    """One canonical chat request, independent of the dialect it arrived in."""

    model: str  # what the client asked for (model group or provider/model)
    messages: tuple[Message, ...]
    system: str = ""
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    reasoning_effort: str | None = None


class StopReason(str, enum.Enum):
    END_TURN = "end_turn"
    TOOL_CALLS = "tool_calls"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"
    ERROR = "error"


@dataclass(slots=True)
class Usage:
    """Token counts in OpenAI's convention: `input_tokens` includes cached prompt tokens and
    `output_tokens` includes reasoning tokens; the cache and reasoning fields are breakdowns."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(slots=True)
class AssistantTurn:
    """The folded answer of one upstream call."""

    blocks: list[Block]
    stop_reason: StopReason
    usage: Usage
    response_id: str = ""
    model: str = ""

    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.blocks if type(b) is ToolCall]

    def message(self) -> Message:
        return Message(Role.ASSISTANT, tuple(self.blocks))
