"""The model groups as Google's `Model` resources (`GET /v1beta/models`, `.../models/{model}`)."""

from __future__ import annotations

from typing import Any

METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def model_json(name: str) -> dict[str, Any]:
    return {
        "name": f"models/{name}",
        "baseModelId": name,
        "version": "gateway",
        "displayName": name,
        "description": "a model group of this gateway",
        "supportedGenerationMethods": METHODS,
    }


def model_list(names: list[str]) -> dict[str, Any]:
    return {"models": [model_json(n) for n in names]}
