"""The continuity a Responses client carries in `encrypted_content`, and nowhere else.

Clients such as Codex keep every output item and send it back, but drop any field they do not
know: `encrypted_content` (of `reasoning` and `compaction` items) is the only opaque field that
survives the round trip. So:

- reasoning OpenAI Responses issued travels as OpenAI made it: the item keeps its own id and
  `encrypted_content` (this wire is that provider's wire; the data layout is the one of
  gateway.providers.openai_responses.decode, kept in step by tests/ingress/test_responses_tokens.py).
  Echoed back, it is offered to OpenAI Responses targets only (issuer unknown: ANY_ISSUER), unless
  the continuity store restores the exact turn first.
- reasoning from any other issuer carries the gateway's sealed token (gateway.transcript.seal):
  authenticated, so a forged one is dropped and counted, and it goes back only to its issuer.
- continuity on text and tool calls (Gemini thought signatures, OpenAI call item ids, native tool
  ids) rides in one more reasoning item at the end of the turn, with no summary: its sealed token
  (a "carrier") maps each call id / text position to its meta.
- a compaction item's `encrypted_content` is the gateway's sealed summary of the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.transcript.model import ANY_ISSUER, Block, Continuity, Reasoning, Text, ToolCall, replace
from gateway.transcript.seal import Sealer

RESPONSES_KIND = "openai_responses"  # reasoning of this kind keeps its own id and token
GATEWAY = "gateway"  # issuer of the gateway's own sealed data (never a provider's)
CARRIER_KIND = "gateway.responses_carrier"
COMPACTION_KIND = "gateway.compaction"
_CLIENT = "client"


def _meta_list(meta: Continuity) -> list[Any]:
    return [meta.provider, meta.scope, meta.kind, meta.model, dict(meta.data)]


def _meta_of(raw: Any) -> Continuity | None:
    if not isinstance(raw, list) or len(raw) != 5 or not isinstance(raw[4], dict):
        return None
    provider, scope, kind, model, data = raw
    if not all(isinstance(v, str) for v in (provider, scope, kind, model)):
        return None
    return Continuity(provider, scope, kind, model, data)


def native(meta: Continuity | None) -> bool:
    """Reasoning OpenAI Responses issued: the client gets the provider's own item."""
    return meta is not None and meta.kind == RESPONSES_KIND


def reasoning_id(meta: Continuity | None) -> str | None:
    if native(meta):
        value = meta.data.get("id")
        return value if isinstance(value, str) and value else None
    return None


def reasoning_summary(block: Reasoning) -> list[str] | None:
    """The summary parts of native reasoning, exactly as issued (its token covers them)."""
    if native(block.meta):
        parts = block.meta.data.get("summary")
        if isinstance(parts, list) and all(isinstance(p, str) for p in parts):
            return parts
    return None


def reasoning_token(meta: Continuity | None, sealer: Sealer) -> str | None:
    if meta is None:
        return None
    if native(meta):
        token = meta.data.get("encrypted_content")
        return token if isinstance(token, str) and token else None
    return sealer.seal(meta)


def echoed_native(item_id: str, token: str, summary: list[str]) -> Continuity:
    """An OpenAI reasoning item a client sent back as it got it."""
    return Continuity(
        _CLIENT,
        ANY_ISSUER,
        RESPONSES_KIND,
        ANY_ISSUER,
        {"id": item_id, "encrypted_content": token, "summary": summary},
    )


def sealed(token: str) -> bool:
    return token.startswith(Sealer.PREFIX)


# -- the carrier -----------------------------------------------------------------------------------


def carrier_token(blocks: list[Block] | tuple[Block, ...], sealer: Sealer) -> str | None:
    """Sealed meta of the turn's text and call blocks, or None when none carries any. Entries:
    ["c", call id, meta], ["t", n, meta] for the n-th non-empty text, ["e", position, meta] for an
    empty text that only carries meta (Gemini's trailing signature part)."""
    entries: list[list[Any]] = []
    texts = 0
    for position, block in enumerate(blocks):
        t = type(block)
        if t is ToolCall:
            if block.meta is not None:
                entries.append(["c", block.id, _meta_list(block.meta)])
        elif t is Text:
            if block.text:
                if block.meta is not None:
                    entries.append(["t", texts, _meta_list(block.meta)])
                texts += 1
            elif block.meta is not None:
                entries.append(["e", position, _meta_list(block.meta)])
    if not entries:
        return None
    return sealer.seal(Continuity(GATEWAY, GATEWAY, CARRIER_KIND, "", {"entries": entries}))


def apply_carrier(blocks: list[Block], carrier: Mapping[str, Any]) -> list[Block]:
    """The turn's blocks with the carried meta back in place (blocks that already carry meta,
    e.g. from another carrier, keep theirs)."""
    calls: dict[str, Continuity] = {}
    texts: dict[int, Continuity] = {}
    empty: list[tuple[int, Continuity]] = []
    for entry in carrier.get("entries") or ():
        if not isinstance(entry, list) or len(entry) != 3:
            continue
        tag, ref, meta = entry[0], entry[1], _meta_of(entry[2])
        if meta is None:
            continue
        if tag == "c" and isinstance(ref, str):
            calls[ref] = meta
        elif tag == "t" and isinstance(ref, int):
            texts[ref] = meta
        elif tag == "e" and isinstance(ref, int):
            empty.append((ref, meta))
    out: list[Block] = []
    n = 0
    for block in blocks:
        t = type(block)
        if t is ToolCall and block.meta is None and block.id in calls:
            block = replace(block, meta=calls[block.id])
        elif t is Text and block.text:
            if block.meta is None and n in texts:
                block = replace(block, meta=texts[n])  # its citations, if any, stay
            n += 1
        out.append(block)
    for position, meta in sorted(empty, key=lambda e: e[0]):
        out.insert(min(position, len(out)), Text("", meta))
    return out


# -- compaction ------------------------------------------------------------------------------------


def compaction_token(summary: str, sealer: Sealer) -> str:
    return sealer.seal(Continuity(GATEWAY, GATEWAY, COMPACTION_KIND, "", {"summary": summary}))


def compaction_summary(token: Any, sealer: Sealer) -> str | None:
    meta = sealer.unseal(token)
    if meta is None or meta.kind != COMPACTION_KIND or meta.provider != GATEWAY:
        return None
    summary = meta.data.get("summary")
    return summary if isinstance(summary, str) else None
