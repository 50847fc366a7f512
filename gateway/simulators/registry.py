"""kind -> simulator sub-app factory and strict request validator."""

from __future__ import annotations

from gateway.simulators import anthropic, deepseek, gemini, kimi, mistral, openai_chat, openai_responses

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
