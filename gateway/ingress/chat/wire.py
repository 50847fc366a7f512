"""Pydantic models of an OpenAI Chat Completions request as clients send it.

Unknown top-level and message fields are tolerated (SDKs add new ones all the time); fields the
gateway cannot honour are rejected with the JSON path of the problem. Known fields are strict, as
OpenAI's own validation is: `"stream": "yes"` or `"max_tokens": "100"` is a 400, never coerced
(an integer is still a valid number).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from gateway.transcript.model import REASONING_EFFORTS


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class CacheControlWire(_Wire):
    """A prompt-cache breakpoint (Anthropic's `cache_control`, as LiteLLM and OpenRouter take it
    on Chat Completions content parts and tools)."""

    type: Literal["ephemeral"]
    ttl: Literal["5m", "1h"] | None = None


class TextPart(_Wire):
    type: Literal["text"]
    text: str
    cache_control: CacheControlWire | None = None


class ImageURL(_Wire):
    url: str
    detail: str | None = None


class ImagePart(_Wire):
    type: Literal["image_url"]
    image_url: ImageURL
    cache_control: CacheControlWire | None = None


class OtherPart(_Wire):
    """Any other part type (input_audio, file, refusal...): decoded only to be refused by name."""

    type: str


UserPart = Union[TextPart, ImagePart, OtherPart]


class FunctionCall(_Wire):
    name: str
    arguments: str = ""


class ToolCallWire(_Wire):
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall


class SystemMessage(_Wire):
    role: Literal["system", "developer"]
    content: Union[str, list[UserPart]]
    cache_control: CacheControlWire | None = None  # LiteLLM: on the message's last block


class UserMessage(_Wire):
    role: Literal["user"]
    content: Union[str, list[UserPart]]
    cache_control: CacheControlWire | None = None


class AssistantMessage(_Wire):
    role: Literal["assistant"]
    content: Union[str, list[UserPart], None] = None
    tool_calls: list[ToolCallWire] | None = None
    refusal: str | None = None  # an earlier answer the model declined: its text
    reasoning_content: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None
    # LiteLLM's echo formats
    thinking_blocks: list[dict[str, Any]] | None = None
    provider_specific_fields: dict[str, Any] | None = None


class ToolMessage(_Wire):
    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1)
    content: Union[str, list[UserPart]]
    cache_control: CacheControlWire | None = None


Message = Annotated[
    Union[SystemMessage, UserMessage, AssistantMessage, ToolMessage], Field(discriminator="role")
]


class FunctionSpec(_Wire):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSpecWire(_Wire):
    type: Literal["function"]
    function: FunctionSpec
    cache_control: CacheControlWire | None = None


class NamedFunction(_Wire):
    name: str


class NamedToolChoice(_Wire):
    type: Literal["function"]
    function: NamedFunction


class JsonSchemaFormat(_Wire):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormatText(_Wire):
    type: Literal["text"]


class ResponseFormatJsonObject(_Wire):
    type: Literal["json_object"]


class ResponseFormatJsonSchema(_Wire):
    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


ResponseFormatWire = Annotated[
    Union[ResponseFormatText, ResponseFormatJsonObject, ResponseFormatJsonSchema], Field(discriminator="type")
]


class StreamOptions(_Wire):
    include_usage: bool = False


class _ModelField(_Wire):
    model: str = Field(min_length=1)


class _MessagesField(_Wire):
    messages: list[Message] = Field(min_length=1)


class _Parameters(_Wire):
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[ToolSpecWire] | None = None
    tool_choice: Union[Literal["auto", "none", "required"], NamedToolChoice, None] = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: Literal[REASONING_EFFORTS] | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    stop: Union[str, list[str], None] = None
    n: int | None = Field(default=None, ge=1)
    response_format: ResponseFormatWire | None = None


# pydantic orders fields base-last-first: model, messages, then the parameters, so the first
# error of a request is the one OpenAI reports first
class ChatCompletionRequest(_Parameters, _MessagesField, _ModelField):
    """A whole request (its first validation error is the one a client is told about)."""


class ChatRequestHead(_Parameters, _ModelField):
    """A request without its messages, which are validated one by one (and only when new:
    gateway/ingress/memo.py); `messages` stays in `model_extra`, unvalidated. So do `tools`,
    validated by `TOOLS` only when not seen before (gateway/ingress/tool_lists.py)."""

    tools: Any = None


MESSAGE = TypeAdapter(Message)
TOOLS = TypeAdapter(Union[list[ToolSpecWire], None], config=ConfigDict(strict=True))
PARTS = TypeAdapter(list[UserPart])  # a long content list, validated a slice at a time
