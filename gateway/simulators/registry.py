"""kind -> simulator sub-app factory and strict request validator."""

from __future__ import annotations

from gateway.simulators import (
    anthropic,
    chat_family,
    deepseek,
    gemini,
    kimi,
    mistral,
    openai_chat,
    openai_responses,
)

_MODULES = {
    "anthropic": anthropic,
    "openai_responses": openai_responses,
    "openai_chat": openai_chat,
    "gemini": gemini,
    "mistral": mistral,
    "kimi": kimi,
    "deepseek": deepseek,
}

# create_app(state: SimulatorState) -> aiohttp.web.Application
APP_FACTORIES = {kind: module.create_app for kind, module in _MODULES.items()}
# validate(state: SimulatorState, body: dict, model: str) -> Rejection | None
VALIDATORS = {kind: module.validate for kind, module in _MODULES.items()}

# kind -> (offered_tools(body) -> [(name, JSON schema)], after_tool_result(body) -> bool): what a
# request offers and whether it ends with tool results, read in each provider's own format
TOOL_VIEWS = {
    "anthropic": (anthropic.offered_tools, anthropic.after_tool_result),
    "openai_responses": (openai_responses.offered_tools, openai_responses.after_tool_result),
    "gemini": (gemini.offered_tools, gemini.after_tool_result),
    **{
        kind: (chat_family.offered_tools, chat_family.after_tool_result)
        for kind in ("openai_chat", "mistral", "kimi", "deepseek")
    },
}
