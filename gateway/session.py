"""Session keys: the client's `X-Session-Id`, or one derived from the conversation's stable prefix."""

from __future__ import annotations

import hashlib
import re

from gateway.bounded_cache import BoundedCache
from gateway.transcript.model import Request, Role

_VALID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def valid_session_id(value: str) -> bool:
    return _VALID.fullmatch(value) is not None


# Keys derived lately, by the texts they were derived from: every turn of a conversation derives
# its key again from the same opening, often the very same string objects (the decode memo's),
# whose hashes Python keeps; an agent's system prompt (Claude Code's: ~20 KB) is not hashed with
# SHA-256 again. Bounded by the text it keeps alive; emptied whole when full. (A long request's
# session is derived in a worker thread: BoundedCache's keep locks a weighed cache.)
_HELD_CHARS = 2 << 20  # (~100 agent conversations with a 20 KB system prompt)
_HELD_KEYS = 4096


def _chars(opening: tuple[str, str, str], key: str) -> int:
    return len(opening[0]) + len(opening[1]) + len(opening[2])


_derived: BoundedCache[tuple[str, str, str], str] = BoundedCache(_HELD_KEYS, _chars, _HELD_CHARS)


def derive_session_key(request: Request, tenant: str = "") -> str:
    """Deterministic from the system prompt that opens the conversation (system messages later
    on, such as per-turn reminders, do not count) and the first user message, so every turn of
    one conversation maps to the same key without any client cooperation. `tenant`: two clients
    with different credentials never share a derived session."""
    user = ""
    for message in request.messages:
        if message.role is Role.USER:
            user = message.text()
            break
    opening = (tenant, request.system_text(), user)
    key = _derived.get(opening)
    if key is None:
        key = _derived.keep(opening, _derive(*opening))
    return key


def _derive(tenant: str, system: str, user: str) -> str:
    # one digest of the joined text: the same bytes as hashing the parts in turn
    text = f"{tenant}\x00{system}\x00{user}"
    return "sess_" + hashlib.sha256(text.encode()).hexdigest()[:32]
