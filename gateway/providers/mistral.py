"""Mistral chat completions: OpenAI-like, 9-character tool ids, whole tool calls per chunk, and
reasoning as `thinking` chunks inside a content array."""

from __future__ import annotations

from gateway.providers.base import Family
from gateway.providers.openai_compat.adapter import (
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
    ThinkingModel,
    ThinkingRule,
    ToolIdRule,
)

# Reasoning (https://docs.mistral.ai/capabilities/reasoning): Magistral models always reason;
# Mistral Small 4 (mistral-small-latest, -2603) and Medium 3.5 reason on `reasoning_effort: "high"`
# and not on "none" (their default); other models do not reason.
THINKING = ThinkingRule(
    (
        ThinkingModel(r"magistral-", can_off=False),
        ThinkingModel(r"mistral-(?:small-(?:latest|2603)|medium-3[.-]5)", efforts=("high",)),
    )
)

CAPABILITIES = Capabilities(
    tool_ids=ToolIdRule(pattern=r"^[a-zA-Z0-9]{9}$", max_len=9, style="alnum9"),
    # "mistral-medium-latest", fine-tunes "ft:open-mistral-7b:587a6b29:20240514:7e773925"
    model_names=ModelNameRule(r"[A-Za-z0-9][A-Za-z0-9._:-]*", 128),
    reasoning_replay=True,
    user_after_tool_forbidden=True,
    last_message_user_or_tool=True,
    # vision: Pixtral, Mistral Medium 3 / Small 3.1 and later, Magistral 1.2 and later
    # (https://docs.mistral.ai/capabilities/vision/: PNG, JPEG, WEBP, non-animated GIF, up to 10 MB
    # each); a tool message carries text, so a tool's images follow in a user message; documents
    # by URL (`document_url`, https://docs.mistral.ai/capabilities/document_ai/)
    media=MediaRule(
        tool_result_images=MediaPlacement.AFTER,
        tool_result_documents=MediaPlacement.AFTER,
        max_image_bytes=10 * 1024 * 1024,
        vision_models=r"(?:pixtral|mistral-medium-(?:2505|2508|latest)|mistral-small-(?:2503|2506|latest)"
        r"|mistral-large-2511|magistral-(?:small|medium)-(?:2509|latest)|devstral-(?:2512|latest))",
        document_urls=True,
    ),
    thinking=THINKING,
)

DIALECT = ChatDialect(
    kind="mistral",
    capabilities=CAPABILITIES,
    documents="document_url",
    stream_usage_option=False,  # Mistral sends usage on the finish chunk and has no stream_options
    reasoning_replay=ReasoningReplay.THINKING_CHUNKS,
    effort_field=True,
    tool_message_name=True,
    error_messages=(
        ("tool call id was", ErrorCategory.PAIRING),
        ("unexpected role", ErrorCategory.PAIRING),
        ("not the same number of function calls and responses", ErrorCategory.PAIRING),
    ),
    error_types=OPENAI_ERROR_TYPES,
    # "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 maximum
    # context length"
    context_overflow=("too large for model with",),
)

ADAPTER = ChatAdapter(DIALECT)
FAMILY = Family(ADAPTER, credential_header="authorization", simulator_path="/mistral/v1")
