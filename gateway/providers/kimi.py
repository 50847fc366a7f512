"""Moonshot Kimi chat completions: OpenAI-shaped, `functions.{name}:{idx}` tool ids, and
`reasoning_content` required on tool-call turns of thinking models."""

from __future__ import annotations

from types import MappingProxyType

from gateway.providers.base import Family
from gateway.providers.openai_compat.adapter import (
    OPENAI_ERROR_MESSAGES,
    OPENAI_ERROR_TYPES,
    ChatAdapter,
    ChatDialect,
    ReasoningReplay,
)
from gateway.transcript.events import ErrorCategory
from gateway.transcript.target import (
    Capabilities,
    MediaPlacement,
    MediaRule,
    ModelNameRule,
    StructuredOutput,
    ThinkingModel,
    ThinkingRule,
    ToolIdRule,
)

# Thinking (https://platform.kimi.ai/docs/api/models-overview, .../guide/use-kimi-k2-thinking-model):
# kimi-k2-thinking models always think; K2.5 and later think unless `thinking: {"type":
# "disabled"}`; earlier K2 and moonshot-v1 models do not think.
THINKING = ThinkingRule(
    (
        ThinkingModel(r"kimi-k2-thinking", can_off=False),
        ThinkingModel(r"kimi-k(?:2\.[5-9]|[3-9])"),
    )
)

CAPABILITIES = Capabilities(
    tool_ids=ToolIdRule(pattern=r"^functions\.[\w-]+:\d+$", max_len=128, style="kimi"),
    # "kimi-k2-0905-preview", "moonshot-v1-8k"
    model_names=ModelNameRule(r"[A-Za-z0-9][A-Za-z0-9._-]*", 128),
    reasoning_replay=True,
    reasoning_content_on_tool_turns=True,
    system_messages_in_place=True,
    # JSON-schema output on K2.5 and later; earlier models have JSON mode only, so they get
    # json_object and the schema with the instructions
    structured_output=StructuredOutput(schema_models=r"kimi-k(?:2\.[5-9]|[3-9])"),
    # image input: K2.5 and the moonshot-v1 vision previews (https://platform.moonshot.ai/docs/
    # guide/use-kimi-vision-model); tool messages carry text, so a tool's images follow in a user
    # message; no PDF input on the chat API (files go through the Files API)
    media=MediaRule(
        tool_result_images=MediaPlacement.AFTER,
        tool_result_documents=MediaPlacement.NONE,
        vision_models=r"(?:kimi-k(?:2\.[5-9]|[3-9])|kimi-latest|moonshot-v1-[0-9a-z]+-vision)",
    ),
    thinking=THINKING,
)

DIALECT = ChatDialect(
    kind="kimi",
    capabilities=CAPABILITIES,
    reasoning_replay=ReasoningReplay.FIELD,
    thinking_switch=True,
    tool_message_name=True,  # Moonshot's tool-call guide sends the function name back
    # "Invalid request: Your request exceeded model token limit: 262144"
    context_overflow=("exceeded model token limit",),
    # Kimi reports cached tokens at the top level of usage (and in prompt_tokens_details)
    cache_read_paths=(("cached_tokens",), ("prompt_tokens_details", "cached_tokens")),
    error_messages=(
        ("reasoning_content is missing", ErrorCategory.CONTINUITY),
        *OPENAI_ERROR_MESSAGES,
    ),
    error_types=MappingProxyType(
        {
            **OPENAI_ERROR_TYPES,
            "rate_limit_reached_error": ErrorCategory.RATE_LIMIT,
            "engine_overloaded_error": ErrorCategory.OVERLOADED,
            "exceeded_current_quota_error": ErrorCategory.QUOTA,
        }
    ),
)

ADAPTER = ChatAdapter(DIALECT)
FAMILY = Family(ADAPTER, credential_header="authorization", simulator_path="/kimi/v1")
