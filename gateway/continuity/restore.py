"""Put recorded turns back into an incoming transcript (DESIGN.md 4.6). Pure: the caller fetches
the records for `lookup_keys` and hands them in.

A recorded turn replaces the client's copy only when the client's visible content (text, tool
names and arguments) still matches what the gateway returned: an edited turn keeps the client's
content and loses its tokens, which the provider would reject as modified anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import orjson
from cachetools import LRUCache

from gateway.continuity.codec import decode_turn
from gateway.continuity.keys import lookup_key, normalize_text
from gateway.repair.report import Repair
from gateway.transcript.model import Block, Message, Request, Role, Text, ToolCall

# Role's members, looked up once: an enum member's lookup costs ~75 ns, per message here
_ASSISTANT = Role.ASSISTANT


def message_keys(request: Request, session: str, tenant: str = "") -> tuple[str | None, ...]:
    """The lookup key of every assistant message, in order (None: nothing to look up)."""
    keys: list[str | None] = []
    for position, message in enumerate(m for m in request.messages if m.role is _ASSISTANT):
        keys.append(lookup_key(message.blocks, session, position, tenant))
    return tuple(keys)


def lookup_keys(request: Request, session: str, tenant: str = "") -> list[str]:
    """The distinct keys to fetch, in order (linear: a set of seen keys, not a list scan)."""
    return list(dict.fromkeys(k for k in message_keys(request, session, tenant) if k is not None))


def answer_position(request: Request) -> int:
    """The position the answer to `request` takes among the conversation's assistant turns."""
    return sum(1 for m in request.messages if m.role is _ASSISTANT)


def _arguments(raw: str) -> str:
    try:
        return orjson.dumps(orjson.loads(raw), option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONDecodeError:
        return raw.strip()


def visible(blocks: tuple[Block, ...]) -> tuple[str, tuple[tuple[str, str, str], ...]]:
    """What a client sees of a turn, normalized the way clients are known to reformat it."""
    text = normalize_text("".join(b.text for b in blocks if type(b) is Text))
    calls = tuple((b.id, b.name, _arguments(b.arguments)) for b in blocks if type(b) is ToolCall)
    return text, calls


# records decoded, by their bytes: an agent's every request restores its whole history, whose
# records are the same from turn to turn (bounded by the records' bytes; a pure function's cache)
_TURNS: LRUCache[bytes, tuple[int, tuple[Block, ...] | None]] = LRUCache(
    maxsize=16 << 20, getsizeof=lambda entry: entry[0]
)


def _decoded(raw: bytes) -> tuple[Block, ...] | None:
    entry = _TURNS.get(raw)
    if entry is None:
        # the record, and its decoded blocks holding about as much again
        entry = (2 * len(raw) + 256, decode_turn(raw))
        _TURNS[raw] = entry
    return entry[1]


def restore(
    request: Request,
    records: Mapping[str, bytes | None],
    session: str,
    tenant: str = "",
    keys: tuple[str | None, ...] | None = None,
) -> tuple[Request, list[Repair]]:
    """`keys`: `message_keys(request, session, tenant)` when the caller computed them already."""
    if keys is None:
        keys = message_keys(request, session, tenant)
    repairs: list[Repair] = []
    messages: list[Message] = []
    changed = False
    position = -1
    for message in request.messages:
        if message.role is _ASSISTANT:
            position += 1
            key = keys[position]
            raw = records.get(key) if key is not None else None
            stored = _decoded(raw) if raw else None
            if stored is not None and stored != message.blocks and visible(stored) == visible(message.blocks):
                messages.append(Message(_ASSISTANT, stored))
                repairs.append(Repair("continuity_restored"))
                changed = True
                continue
        messages.append(message)
    if not changed:
        return request, repairs
    return replace(request, messages=tuple(messages)), repairs
