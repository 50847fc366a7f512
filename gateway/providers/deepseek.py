"""DeepSeek chat completions: OpenAI-shaped, with `reasoning_content` that thinking mode wants
back on every assistant turn that made tool calls."""

from __future__ import annotations

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

# Thinking mode (https://api-docs.deepseek.com/guides/thinking_mode): `thinking: {"type":
# "enabled"|"disabled"}` switches it (V4 models think unless disabled, deepseek-chat only when
# enabled) and `reasoning_effort` sizes it on V4 (low / high; the docs map the other levels onto
# these); deepseek-reasoner always thinks.
THINKING = ThinkingRule(
    (
        ThinkingModel(r"deepseek-reasoner", can_off=False),
        ThinkingModel(r"deepseek-v4", efforts=("low", "high")),
        ThinkingModel(r"deepseek-chat"),
    )
)

CAPABILITIES = Capabilities(
    tool_ids=ToolIdRule(pattern=r"^[A-Za-z0-9_.:-]{1,64}$", max_len=64, style="prefixed", prefix="call_"),
    # "deepseek-chat", "deepseek-reasoner"
    model_names=ModelNameRule(r"[A-Za-z0-9][A-Za-z0-9._-]*", 64),
    reasoning_replay=True,
    reasoning_content_on_tool_turns=True,
    system_messages_in_place=True,
    # DeepSeek refuses json_schema ("This response_format type is unavailable now"): JSON mode,
    # with the schema in the instructions
    structured_output=StructuredOutput(schema_models=None),
    # text only: a content part other than text is refused ("unknown variant `image_url`,
    # expected `text`", https://api-docs.deepseek.com/api/create-chat-completion: user content is
    # a string); every image and document becomes a placeholder
    media=MediaRule(
        tool_result_images=MediaPlacement.NONE,
        tool_result_documents=MediaPlacement.NONE,
        vision_models=None,
    ),
    thinking=THINKING,
)

DIALECT = ChatDialect(
    kind="deepseek",
    capabilities=CAPABILITIES,
    reasoning_replay=ReasoningReplay.FIELD,
    effort_field=True,
    thinking_switch=True,
    user_images=False,
    cache_read_paths=(("prompt_cache_hit_tokens",), ("prompt_tokens_details", "cached_tokens")),
    error_messages=(
        ("missing reasoning_content field", ErrorCategory.CONTINUITY),
        ("reasoning_content in the thinking mode must be passed back", ErrorCategory.CONTINUITY),
        ("insufficient balance", ErrorCategory.QUOTA),  # HTTP 402
        *OPENAI_ERROR_MESSAGES,
    ),
    error_types=OPENAI_ERROR_TYPES,
)

ADAPTER = ChatAdapter(DIALECT)
FAMILY = Family(ADAPTER, credential_header="authorization", simulator_path="/deepseek/v1")
