"""Session keys: the client's `X-Session-Id`, or one derived from the conversation's stable prefix."""

from __future__ import annotations

import hashlib
import re

from gateway.transcript.model import Request, Role

_VALID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def valid_session_id(value: str) -> bool:
    return _VALID.fullmatch(value) is not None


def derive_session_key(request: Request, tenant: str = "") -> str:
    """Deterministic from the system prompt that opens the conversation (system messages later
    on, such as per-turn reminders, do not count) and the first user message, so every turn of
    one conversation maps to the same key without any client cooperation. `tenant`: two clients
    with different credentials never share a derived session."""
    first_user = next((m for m in request.messages if m.role is Role.USER), None)
    user = first_user.text() if first_user is not None else ""
    # one digest of the joined text: the same bytes as hashing the parts in turn
    text = f"{tenant}\x00{request.system_text()}\x00{user}"
    return "sess_" + hashlib.sha256(text.encode()).hexdigest()[:32]
