"""OpenAI Chat Completions (and Azure OpenAI chat) as a dialect of the shared chat codec."""

from __future__ import annotations

from gateway.providers.base import Family
from gateway.providers.openai_compat.adapter import (
    OPENAI_ERROR_MESSAGES,
    OPENAI_ERROR_TYPES,
    ChatAdapter,
    ChatDialect,
    ReasoningReplay,
)
from gateway.providers.openai_responses.adapter import (
    OPENAI_MODEL_NAMES,
    OPENAI_THINKING,
    OPENAI_VISION_MODELS,
)
from gateway.transcript.target import Capabilities, MediaPlacement, MediaRule, ToolIdRule

CAPABILITIES = Capabilities(
    # chat tool-call ids are free-form strings; the API caps them at 40 characters
    tool_ids=ToolIdRule(pattern=r"^[A-Za-z0-9_.:-]{1,40}$", max_len=40, style="prefixed", prefix="call_"),
    model_names=OPENAI_MODEL_NAMES,
    reasoning_replay=False,
    system_messages_in_place=True,
    empty_assistant_turn_ok=True,
    # a tool message's content is "a string or an array of text content parts"
    # (https://platform.openai.com/docs/api-reference/chat/create, messages > tool message):
    # images follow the results in a user message; user parts take images and PDF `file` data
    media=MediaRule(
        tool_result_images=MediaPlacement.AFTER,
        tool_result_documents=MediaPlacement.AFTER,
        max_image_bytes=50 * 1024 * 1024,
        vision_models=OPENAI_VISION_MODELS,
        pdf_data=True,
    ),
    thinking=OPENAI_THINKING,  # the same models as the Responses API, `reasoning_effort` here
)

DIALECT = ChatDialect(
    kind="openai_chat",
    capabilities=CAPABILITIES,
    documents="file",
    max_tokens_field="max_completion_tokens",  # max_tokens is rejected by reasoning models
    effort_field=True,
    reasoning_refuses_sampling=True,
    reasoning_replay=ReasoningReplay.NONE,
    error_messages=OPENAI_ERROR_MESSAGES,
    error_types=OPENAI_ERROR_TYPES,
)

ADAPTER = ChatAdapter(DIALECT)
FAMILY = Family(ADAPTER, credential_header="authorization", simulator_path="/openai_chat/v1")
