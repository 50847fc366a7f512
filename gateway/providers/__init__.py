"""Provider families by kind: the one list of them. Each module is sans-IO; `upstream.py` does the
HTTP.

A family is one record (`providers.base.Family`: its adapter and capabilities, where its key
travels, the headers it sets, its simulator path) in its own module or package; adding a family is
that module plus one line in `FAMILIES` below (README "Architecture")."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.providers import anthropic, deepseek, gemini, kimi, mistral, openai_chat, openai_responses
from gateway.providers.base import Family, ProviderAdapter

FAMILIES: Mapping[str, Family] = {
    family.kind: family
    for family in (
        anthropic.FAMILY,
        openai_responses.FAMILY,
        openai_chat.FAMILY,
        gemini.FAMILY,
        mistral.FAMILY,
        kimi.FAMILY,
        deepseek.FAMILY,
    )
}
KINDS: tuple[str, ...] = tuple(FAMILIES)


def get_adapter(kind: str) -> ProviderAdapter:
    family = FAMILIES.get(kind)
    if family is None:
        raise KeyError(f"unknown provider kind {kind!r}")
    return family.adapter
