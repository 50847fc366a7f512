"""Pydantic models of an Anthropic Messages request as Claude Code and the `anthropic` SDKs send it.

Unknown fields are tolerated (Claude Code adds new ones with each release, e.g. `defer_loading` on
tools or a per-message `output_config`); unknown block types and fields the gateway cannot honour
on any provider are refused with the JSON path of the problem.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, create_model

from gateway.ingress.chat.wire import CacheControlWire  # Anthropic's own format, shared


class _Wire(BaseModel):
    # strict, as chat and Responses are: `"stream": "yes"` or `"max_tokens": "100"` is a 400, not coerced
    model_config = ConfigDict(extra="allow", strict=True)


class TextBlock(_Wire):
    type: Literal["text"]
    text: str
    cache_control: CacheControlWire | None = None
    citations: list[dict[str, Any]] | None = None  # what the text cites (server tools, documents)


class Base64Source(_Wire):
    type: Literal["base64"]
    media_type: str = Field(min_length=1)
    data: str


class URLSource(_Wire):
    type: Literal["url"]
    url: str = Field(min_length=1)


class PlainTextSource(_Wire):
    type: Literal["text"]
    media_type: Literal["text/plain"] = "text/plain"
    data: str


class OtherSource(_Wire):
    """`file` (Files API ids), `content` (documents made of blocks): refused by name."""

    type: str


def _tagged(*models: type[_Wire]) -> Any:
    """A union discriminated by `type`: a known tag validates against its model (so a malformed
    text block is an error about the text block), any other tag is `Other*`, refused by name."""
    tags = {m.model_fields["type"].annotation.__args__[0]: m for m in models[:-1]}  # Literal["x"]

    def tag(value: Any) -> str:
        kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
        return kind if kind in tags else "other"

    branches = [Annotated[m, Tag(t)] for t, m in tags.items()]
    return Annotated[Union[tuple([*branches, Annotated[models[-1], Tag("other")]])], Discriminator(tag)]


ImageSource = _tagged(Base64Source, URLSource, OtherSource)
DocumentSource = _tagged(Base64Source, URLSource, PlainTextSource, OtherSource)


class ImageBlock(_Wire):
    type: Literal["image"]
    source: ImageSource
    cache_control: CacheControlWire | None = None


class DocumentBlock(_Wire):
    type: Literal["document"]
    source: DocumentSource
    title: str | None = None
    context: str | None = None
    cache_control: CacheControlWire | None = None


class ToolReferenceBlock(_Wire):
    """Claude Code's tool search result: the named tool is now available (its definition is in
    `tools`). The gateway sends every tool up front, so this becomes a line of text."""

    type: Literal["tool_reference"]
    tool_name: str


class OtherBlock(_Wire):
    """Any other block type: decoded only to be refused by name."""

    type: str


ToolResultPart = _tagged(TextBlock, ImageBlock, DocumentBlock, ToolReferenceBlock, OtherBlock)


class ToolResultBlock(_Wire):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: Union[str, list[ToolResultPart], None] = None
    is_error: bool = False
    cache_control: CacheControlWire | None = None


class ToolUseBlock(_Wire):
    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any]
    cache_control: CacheControlWire | None = None


class ThinkingBlock(_Wire):
    type: Literal["thinking"]
    thinking: str
    signature: str = ""


class RedactedThinkingBlock(_Wire):
    type: Literal["redacted_thinking"]
    data: str


ContentBlock = _tagged(
    TextBlock,
    ImageBlock,
    DocumentBlock,
    ToolResultBlock,
    ToolUseBlock,
    ThinkingBlock,
    RedactedThinkingBlock,
    OtherBlock,
)


class MessageWire(_Wire):
    role: Literal["user", "assistant", "system"]
    content: Union[str, list[ContentBlock]]


class CustomTool(_Wire):
    type: Literal["custom"] | None = None
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,128}$")
    description: str | None = None
    input_schema: dict[str, Any]
    cache_control: CacheControlWire | None = None
    strict: bool | None = None


class ServerTool(_Wire):
    """A tool Anthropic defines and (for server tools) runs: web_search_20250305,
    code_execution_*, bash_*, text_editor_*, ... Only Anthropic targets take it."""

    type: str
    name: str = ""


def _tool_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "custom" if kind in (None, "custom") else "server"


Tool = Annotated[
    Union[Annotated[CustomTool, Tag("custom")], Annotated[ServerTool, Tag("server")]],
    Discriminator(_tool_kind),
]


class ToolChoiceWire(_Wire):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingEnabled(_Wire):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1024)
    display: Literal["summarized", "omitted"] | None = None


class ThinkingAdaptive(_Wire):
    type: Literal["adaptive"]
    display: Literal["summarized", "omitted"] | None = None


class ThinkingDisabled(_Wire):
    type: Literal["disabled"]


Thinking = Annotated[Union[ThinkingEnabled, ThinkingAdaptive, ThinkingDisabled], Field(discriminator="type")]


class JsonSchemaFormat(_Wire):
    """Structured outputs: the answer is JSON valid for `schema`."""

    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Wire):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JsonSchemaFormat | None = None


class MessagesRequest(_Wire):
    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[MessageWire] = Field(min_length=1)
    system: Union[str, list[TextBlock], None] = None
    metadata: dict[str, Any] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    tools: list[Tool] | None = None
    tool_choice: ToolChoiceWire | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    context_management: dict[str, Any] | None = None
    service_tier: str | None = None


class CountTokensRequest(MessagesRequest):
    """`/v1/messages/count_tokens` takes a Messages request without `max_tokens`."""

    max_tokens: int | None = Field(default=None, ge=1)  # type: ignore[assignment]


def _head(model: type[MessagesRequest]) -> type[BaseModel]:
    """`model` without `messages`, which are validated one by one (and only when new:
    gateway/ingress/memo.py), and without `tools`, validated by `TOOLS` only when not seen
    before (gateway/ingress/tool_lists.py); both stay in `model_extra`, unvalidated."""
    fields: dict[str, Any] = {
        name: (info.annotation, info)
        for name, info in model.model_fields.items()
        if name not in ("messages", "tools")
    }
    return create_model(f"{model.__name__}Head", __base__=_Wire, **fields)


HEADS = {MessagesRequest: _head(MessagesRequest), CountTokensRequest: _head(CountTokensRequest)}
MESSAGE = TypeAdapter(MessageWire)
TOOLS = TypeAdapter(Union[list[Tool], None], config=ConfigDict(strict=True))


# union tags pydantic puts in error locations (after a list index, or after the field that holds
# the union); a client wants the JSON path of its own field
_TAGS = frozenset(
    (
        "text", "image", "document", "tool_result", "tool_use", "thinking", "redacted_thinking",
        "tool_reference", "other", "base64", "url", "custom", "server", "enabled", "adaptive", "disabled",
    )
)  # fmt: skip
_TAGGED_FIELDS = frozenset(("source", "thinking"))


def field_path(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as the JSON path of the client's field, in the API's own dotted
    form: ("messages", 0, "content", "list[...]", 1, "tool_use", "input") -> messages.0.content.1.input"""
    out: list[Any] = []
    tag_may_follow = False
    for part in loc:
        if isinstance(part, str):
            if part in ("str", "none") or "[" in part or part[:1].isupper():
                continue  # a union branch named by its type
            if tag_may_follow and part in _TAGS:
                tag_may_follow = False
                continue
        out.append(part)
        tag_may_follow = isinstance(part, int) or part in _TAGGED_FIELDS
    return ".".join(str(p) for p in out)


def first_error(errors: list[Any]) -> tuple[str, str]:
    """(path, message) of the most specific validation error: a field that is neither a string
    nor a list of blocks fails both branches, and the deeper failure says what is wrong."""
    best = max(errors, key=lambda e: len(e["loc"]))
    return field_path(best["loc"]), best["msg"]
