"""Fingerprints under which a turn is recorded and found again.

A turn with tool calls is found by its canonical call ids: they are unique and unguessable, so the
lookup works even when the session key changed (the client compacted its first message). A
text-only turn is found by session key + its position among the assistant turns + a hash of its
normalized text: a model that says the same thing twice gets each turn's own tokens back.

Every key is scoped to a tenant (a hash of the client's credential when the gateway authenticates
clients; "" otherwise): one tenant's continuity is never found by another's request, even when it
replays the same tool-call ids or opens with the same messages.
"""

from __future__ import annotations

import hashlib

from gateway.transcript.model import Block, Text, ToolCall


def normalize_text(text: str) -> str:
    return " ".join(text.split())


def call_key_prefix(tenant: str = "") -> str:
    """What every call key of `tenant` opens with: `call_key(id, tenant)` is it followed by `id`."""
    return f"call:{tenant}:" if tenant else "call:"


def call_key(call_id: str, tenant: str = "") -> str:
    return call_key_prefix(tenant) + call_id


def text_key_prefix(session: str, tenant: str = "") -> str:
    """What every text key of `session` (and `tenant`) opens with: `text_key` is it followed by
    the turn's position and digest."""
    return f"text:{tenant}:{session}:" if tenant else f"text:{session}:"


def _digest(normal: str) -> str:
    return hashlib.sha256(normal.encode()).hexdigest()[:40]


def text_key(session: str, position: int, text: str, tenant: str = "") -> str:
    return f"{text_key_prefix(session, tenant)}{position}:{_digest(normalize_text(text))}"


def text_turn_key(prefix: str, position: int, blocks: tuple[Block, ...]) -> str | None:
    """`lookup_key` of a turn without calls, its scope's `text_key_prefix` made once for every
    turn (`keyed`): through `lookup_key` each text turn paid three calls and two more walks of
    its blocks (the bench's cold 1,000-message turn, 45 text turns: `keyed` 2.44M -> 1.83M
    instructions). tests/continuity/test_keys.py compares it with `lookup_key`."""
    if len(blocks) == 1 and type(blocks[0]) is Text:
        text = blocks[0].text
    else:
        text = "".join([b.text for b in blocks if type(b) is Text])
    # whitespace alone normalizes to "" (`split` and `strip` know the same whitespace)
    normal = " ".join(text.split())
    return f"{prefix}{position}:{_digest(normal)}" if normal else None


def turn_keys(
    blocks: list[Block] | tuple[Block, ...], session: str, position: int, tenant: str = ""
) -> list[str]:
    """Every key the turn is recorded under (one per call, or the text key). `position`: how many
    assistant turns come before it in the conversation."""
    calls = [call_key(b.id, tenant) for b in blocks if type(b) is ToolCall]
    if calls:
        return calls
    text = "".join(b.text for b in blocks if type(b) is Text)
    return [text_key(session, position, text, tenant)] if text.strip() else []


def lookup_key(blocks: tuple[Block, ...], session: str, position: int, tenant: str = "") -> str | None:
    """The one key a client-sent assistant message is looked up by."""
    for block in blocks:
        if type(block) is ToolCall:
            return call_key(block.id, tenant)
    keys = turn_keys(blocks, session, position, tenant)
    return keys[0] if keys else None


def history_key(answer_id: str, tenant: str = "") -> str:
    """Where an answer the client may continue by its id is kept, with the transcript it ends."""
    return f"history:{tenant}:{answer_id}" if tenant else "history:" + answer_id


def item_key(item_id: str, tenant: str = "") -> str:
    """Where one output item of a kept answer is kept, by the id the client got for it."""
    return f"item:{tenant}:{item_id}" if tenant else "item:" + item_id
