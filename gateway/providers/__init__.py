"""Provider adapters by kind. Each module is sans-IO; `upstream.py` does the HTTP."""

from __future__ import annotations

from importlib import import_module

from gateway.providers.base import ProviderAdapter

KINDS = ("anthropic", "openai_responses", "openai_chat", "gemini", "mistral", "kimi", "deepseek")

_adapters: dict[str, ProviderAdapter] = {}


def get_adapter(kind: str) -> ProviderAdapter:
    adapter = _adapters.get(kind)
    if adapter is None:
        if kind not in KINDS:
            raise KeyError(f"unknown provider kind {kind!r}")
        adapter = import_module(f"gateway.providers.{kind}").ADAPTER
        _adapters[kind] = adapter
    return adapter
