"""The canonical transcript: the one hub every ingress dialect decodes into and every provider
encodes from.

Values are frozen: repair passes build new transcripts instead of editing one, so failover can
re-run them on the same canonical input for the next target.

They are msgspec Structs: decode, every repair pass that rewrites a block, restore and encode build
them by the thousand on a long transcript's first sight, and a Struct is built and compared in C
(a five-field `Text` ~55 ns, where a frozen dataclass took ~350). The frozen ones are `gc=False`:
they are trees of immutable values (a Mapping field holds JSON values, never a transcript value),
so they can never be part of a reference cycle, and the cyclic collector need not track them (a
long transcript the memo or the inspector holds costs it nothing).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Union

from msgspec import Struct, field
from msgspec.structs import force_setattr

# a changed copy of a transcript value (what `dataclasses.replace` was for them), built in C; it runs
# the class's `__post_init__` as any construction does
from msgspec.structs import replace as replace

from gateway.transcript.decision import Decision

NATIVE_ID = "native_id"
# scope/model of a token a client echoed in a provider's raw format (LiteLLM's thinking_blocks,
# Gemini's thought_signature): the issuer is unknown, so it is offered to any target of that kind
# and rejection recovery removes it if the provider refuses it
ANY_ISSUER = "*"


class Continuity(Struct, frozen=True, gc=False):
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


class CacheControl(Struct, frozen=True, gc=False):
    """A prompt-cache breakpoint the client put on a block or a tool (Anthropic's
    `cache_control`): the prefix up to and including it is cached. Providers that cache
    implicitly ignore it; the order and bytes of the prefix are what they key on."""

    ttl: str | None = None  # "5m" | "1h"; None: the provider's default


class Source(Struct, frozen=True, gc=False):
    """A web page or file a server tool found (a search hit, a fetched page)."""

    url: str
    title: str = ""


class Citation(Struct, frozen=True, gc=False):
    """What a span of answer text cites (Anthropic `citations`, OpenAI `url_citation`
    annotations, Gemini grounding supports). `meta`: the issuer's own wire form (Anthropic's
    `encrypted_index`), replayed only to it; every other family reads url, title and cited text."""

    url: str = ""
    title: str = ""
    cited_text: str = ""
    meta: Continuity | None = None


class Text(Struct, frozen=True, gc=False):
    text: str
    meta: Continuity | None = None  # e.g. a Gemini thoughtSignature carried on a text part
    cache: CacheControl | None = None
    # the model declined: this text says why (OpenAI `refusal`). Sent back in a later turn it is
    # plain assistant text for every provider
    refusal: bool = False
    citations: tuple[Citation, ...] = ()


class Image(Struct, frozen=True, gc=False):
    url: str  # http(s) URL or data: URL
    detail: str | None = None
    cache: CacheControl | None = None


class Document(Struct, frozen=True, gc=False):
    """A file the user attached (a PDF, a plain-text document). `source` is an http(s) URL or a
    base64 data: URL carrying the media type."""

    source: str
    media_type: str = "application/pdf"
    title: str | None = None
    cache: CacheControl | None = None


class Reasoning(Struct, frozen=True, gc=False):
    """Model reasoning. `text` is what a person may read (may be empty for redacted or
    encrypted-only reasoning); `meta` holds the issuer's continuity token, if any."""

    text: str
    meta: Continuity | None = None


class ToolCall(Struct, frozen=True, gc=False):
    id: str  # canonical id (gateway-minted for calls the gateway returned)
    name: str
    # raw JSON text of the arguments object; for a custom (freeform) tool, the raw input text
    arguments: str
    meta: Continuity | None = None  # native id, Gemini signature, Responses item id
    custom: bool = False  # a call of a custom tool (ToolSpec.kind "custom"): input is free text
    cache: CacheControl | None = None


class ToolResult(Struct, frozen=True, gc=False):
    call_id: str  # canonical id of the call it answers
    content: str
    is_error: bool = False
    images: tuple[Image, ...] = ()
    cache: CacheControl | None = None
    # files the tool returned (a PDF the Read tool opened); where they may go is each family's
    # MediaRule (gateway/transcript/target.py)
    documents: tuple[Document, ...] = ()
    # inserted by repair for a call that had none (never a result a client sent, whatever its text)
    synthetic: bool = False


class ServerToolCall(Struct, frozen=True, gc=False):
    """A call of a tool the provider ran itself (Anthropic `server_tool_use`, OpenAI
    `web_search_call` / `file_search_call`, Gemini's grounding search). `meta` holds the issuer's
    own wire item, replayed intact only to it; every other family reads the readable fields
    (repair/server_tools.py renders them as text)."""

    id: str
    name: str  # "web_search", "web_fetch", "file_search", "google_search", ...
    input: str  # JSON text of what it was asked (the query, the URL)
    meta: Continuity | None = None


class ServerToolResult(Struct, frozen=True, gc=False):
    """What a server tool returned: its sources and any readable text (the content itself may be
    encrypted, `encrypted_content`, readable only by the issuer: kept in `meta`)."""

    call_id: str
    name: str
    sources: tuple[Source, ...] = ()
    text: str = ""
    is_error: bool = False
    meta: Continuity | None = None


Block = Union[Text, Image, Document, Reasoning, ToolCall, ToolResult, ServerToolCall, ServerToolResult]


class Role(str, enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"
    # carries ToolResult blocks; after repair for a target whose wire merges a user turn into one
    # message (capabilities.merge_user_turns), the user's own blocks of that turn may follow them
    TOOL = "tool"
    # instructions given at this point of the conversation (Text blocks only); the ones before
    # the first message are Request.system instead
    SYSTEM = "system"


class Message(Struct, frozen=True, gc=False):
    role: Role
    blocks: tuple[Block, ...]

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.blocks if type(b) is ToolCall)

    def text(self) -> str:
        return "".join(b.text for b in self.blocks if type(b) is Text)


class ToolKind(str, enum.Enum):
    FUNCTION = "function"  # arguments are a JSON object described by `parameters`
    CUSTOM = "custom"  # freeform text input, optionally constrained by a grammar (`format`)


class ToolSpec(Struct, frozen=True, gc=False):
    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    kind: ToolKind = ToolKind.FUNCTION
    strict: bool | None = None  # the client asked for strict schema adherence
    format: Mapping[str, Any] | None = None  # custom tools: the input grammar, as the client sent it
    cache: CacheControl | None = None


class HostedTool(Struct, frozen=True, gc=False):
    """A tool the provider runs itself (web search, file search, code execution...). Only targets
    of `kind` can run it; `spec` is the tool's wire object for that provider, replayed as is.
    `required`: a target that cannot run it cannot serve the request (else it is left out for
    such a target, and counted)."""

    kind: str  # provider kind that hosts it
    type: str  # the tool's type on that provider's wire, e.g. "web_search_20250305"
    spec: Mapping[str, Any]
    required: bool = False


class ResponseFormat(Struct, frozen=True, gc=False):
    """Structured output: the answer is JSON (`json_object`), or JSON valid for `schema`
    (`json_schema`)."""

    type: str  # "json_object" | "json_schema"
    name: str = "response"
    schema: Mapping[str, Any] | None = None
    strict: bool | None = None
    description: str = ""


class ToolChoiceMode(str, enum.Enum):
    AUTO = "auto"
    NONE = "none"
    REQUIRED = "required"
    TOOL = "tool"  # exactly the named tool


class ToolChoice(Struct, frozen=True, gc=False):
    mode: ToolChoiceMode
    name: str | None = None


REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


class Request(Struct, frozen=True, gc=False):
    """One canonical chat request, independent of the dialect it arrived in."""

    model: str  # what the client asked for (model group or provider/model)
    messages: tuple[Message, ...]
    # the instructions that open the conversation, in blocks (cache breakpoints sit on blocks);
    # a plain string is accepted and becomes one block
    system: tuple[Text, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: tuple[str, ...] = ()
    reasoning_effort: str | None = None
    # the client's thinking on/off (None: it did not say); what is sent is `decision`'s
    thinking: bool | None = None
    thinking_budget: int | None = None  # the client's own budget (Anthropic budget_tokens)
    # what the dialect means when the client says nothing about reasoning: False (the Messages
    # API: thinking off) or None (chat, Responses: the model's own default)
    thinking_default: bool | None = None
    reasoning_summary: str | None = None  # "auto" | "concise" | "detailed" (Responses)
    response_format: ResponseFormat | None = None
    hosted_tools: tuple[HostedTool, ...] = ()
    # options only one provider kind understands, keyed by that kind (e.g. Anthropic betas,
    # context_management, metadata); other kinds never see them
    provider_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    cache_key: str | None = None  # a client's prompt-cache routing key (OpenAI prompt_cache_key)
    # repair's decision for the target this copy is prepared for (gateway/transcript/reasoning.py)
    decision: Decision | None = None

    def __post_init__(self) -> None:
        if isinstance(self.system, str):
            force_setattr(self, "system", (Text(self.system),) if self.system else ())

    def system_text(self) -> str:
        """The opening instructions as one string, for APIs that take a single one."""
        return "\n\n".join(b.text for b in self.system if b.text)


class StopReason(str, enum.Enum):
    END_TURN = "end_turn"
    TOOL_CALLS = "tool_calls"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"  # the model declined (Anthropic stop_reason refusal, OpenAI refusal)
    PAUSE_TURN = "pause_turn"  # a long server-tool turn paused; the client sends it back to resume
    ERROR = "error"


class Usage(Struct, gc=False):
    """Token counts in OpenAI's convention: `input_tokens` includes cached prompt tokens and
    `output_tokens` includes reasoning tokens; the cache and reasoning fields are breakdowns."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


class AssistantTurn(Struct):
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
