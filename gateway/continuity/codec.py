"""Serialize a canonical assistant turn (blocks with their continuity meta) for the store."""

from __future__ import annotations

from typing import Any

import orjson

from gateway.transcript.model import Block, Continuity, Reasoning, Text, ToolCall

_VERSION = 1


def _meta(meta: Continuity | None) -> list[Any] | None:
    if meta is None:
        return None
    return [meta.provider, meta.scope, meta.kind, meta.model, meta.data]


def _unmeta(raw: Any) -> Continuity | None:
    if raw is None:
        return None
    provider, scope, kind, model, data = raw
    return Continuity(provider, scope, kind, model, data)


def encode_turn(blocks: list[Block] | tuple[Block, ...]) -> bytes:
    out: list[list[Any]] = []
    for block in blocks:
        t = type(block)
        if t is Text:
            out.append(["f" if block.refusal else "t", block.text, _meta(block.meta)])
        elif t is Reasoning:
            out.append(["r", block.text, _meta(block.meta)])
        elif t is ToolCall:
            out.append(["c", block.id, block.name, block.arguments, _meta(block.meta)])
        else:  # assistant turns hold only these kinds; anything else is a caller bug
            raise TypeError(f"cannot record {t.__name__} in an assistant turn")
    return orjson.dumps([_VERSION, out])


def decode_turn(raw: bytes) -> tuple[Block, ...] | None:
    """The recorded blocks, or None for a record this version cannot read (treated as a miss)."""
    try:
        version, items = orjson.loads(raw)
        if version != _VERSION:
            return None
        blocks: list[Block] = []
        for item in items:
            tag = item[0]
            if tag == "t":
                blocks.append(Text(item[1], _unmeta(item[2])))
            elif tag == "f":
                blocks.append(Text(item[1], _unmeta(item[2]), refusal=True))
            elif tag == "r":
                blocks.append(Reasoning(item[1], _unmeta(item[2])))
            elif tag == "c":
                blocks.append(ToolCall(item[1], item[2], item[3], _unmeta(item[4])))
            else:
                return None
        return tuple(blocks)
    except (orjson.JSONDecodeError, ValueError, TypeError, IndexError):
        return None
