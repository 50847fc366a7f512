"""`GET /v1/models` in OpenAI's list shape (the `openai` SDK's `models.list()`, for Chat
Completions and Responses clients alike): the model groups a client may ask for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def openai_model_list(names: Sequence[str]) -> dict[str, Any]:
    data = [{"id": name, "object": "model", "created": 0, "owned_by": "gateway"} for name in names]
    return {"object": "list", "data": data}
