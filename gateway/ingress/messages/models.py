"""`GET /v1/models` in Anthropic's list shape (the Anthropic SDKs' `models.list()`): the model
groups a client may ask for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# the groups exist since the gateway started; a fixed date keeps the answer deterministic
CREATED_AT = "1970-01-01T00:00:00Z"


def anthropic_model_list(names: Sequence[str]) -> dict[str, Any]:
    data = [{"type": "model", "id": n, "display_name": n, "created_at": CREATED_AT} for n in names]
    return {
        "data": data,
        "has_more": False,
        "first_id": names[0] if names else None,
        "last_id": names[-1] if names else None,
    }


def anthropic_client(headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
    """The Anthropic SDKs send their API version on every call, `models.list()` included."""
    return "anthropic-version" in headers
