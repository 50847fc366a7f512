"""Serialize canonical blocks (with their continuity meta) for the store: an assistant turn (the
record restore puts back), or one link of a kept conversation (an answer kept under its id, which a
later request continues by naming it: see gateway/continuity/chain.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.transcript.model import (
    Block,
    Citation,
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Role,
    ServerToolCall,
    ServerToolResult,
    Source,
    Text,
    ToolCall,
    ToolResult,
)

_VERSION = 1
_LINK_VERSION = 2
_ITEM_VERSION = 1
_ASSISTANT_KINDS = (Text, Reasoning, ToolCall, ServerToolCall, ServerToolResult)


def _meta(meta: Continuity | None) -> list[Any] | None:
    if meta is None:
        return None
    return [meta.provider, meta.scope, meta.kind, meta.model, meta.data]


def _unmeta(raw: Any) -> Continuity | None:
    if raw is None:
        return None
    provider, scope, kind, model, data = raw
    return Continuity(provider, scope, kind, model, data)


def _citation(c: Citation) -> list[Any]:
    return [c.url, c.title, c.cited_text, _meta(c.meta)]


def _block(block: Block) -> list[Any]:
    t = type(block)
    if t is Text:
        text = ["f" if block.refusal else "t", block.text, _meta(block.meta)]
        if block.citations:
            text.append([_citation(c) for c in block.citations])
        return text
    if t is ServerToolCall:
        return ["s", block.id, block.name, block.input, _meta(block.meta)]
    if t is ServerToolResult:
        sources = [[s.url, s.title] for s in block.sources]
        return ["S", block.call_id, block.name, sources, block.text, block.is_error, _meta(block.meta)]
    if t is Reasoning:
        return ["r", block.text, _meta(block.meta)]
    if t is ToolCall:
        call = ["c", block.id, block.name, block.arguments, _meta(block.meta)]
        if block.custom:
            call.append(1)
        return call
    if t is ToolResult:
        images = [[i.url, i.detail] for i in block.images]
        result = ["o", block.call_id, block.content, block.is_error, images]
        if block.documents:
            result.append([[d.source, d.media_type, d.title] for d in block.documents])
        return result
    if t is Image:
        return ["i", block.url, block.detail]
    if t is Document:
        return ["d", block.source, block.media_type, block.title]
    raise TypeError(f"cannot record a {t.__name__} block")


def _unblock(item: list[Any]) -> Block:
    tag = item[0]
    if tag == "t":
        citations = tuple(Citation(u, t, c, _unmeta(m)) for u, t, c, m in item[3]) if len(item) > 3 else ()
        return Text(item[1], _unmeta(item[2]), citations=citations)
    if tag == "s":
        return ServerToolCall(item[1], item[2], item[3], _unmeta(item[4]))
    if tag == "S":
        sources = tuple(Source(url, title) for url, title in item[3])
        return ServerToolResult(item[1], item[2], sources, item[4], bool(item[5]), _unmeta(item[6]))
    if tag == "f":
        return Text(item[1], _unmeta(item[2]), refusal=True)
    if tag == "r":
        return Reasoning(item[1], _unmeta(item[2]))
    if tag == "c":
        return ToolCall(item[1], item[2], item[3], _unmeta(item[4]), custom=len(item) > 5)
    if tag == "o":
        documents = tuple(Document(*d) for d in item[5]) if len(item) > 5 else ()
        return ToolResult(
            item[1],
            item[2],
            bool(item[3]),
            tuple(Image(url, detail) for url, detail in item[4]),
            documents=documents,
        )
    if tag == "i":
        return Image(item[1], item[2])
    if tag == "d":
        return Document(item[1], item[2], item[3])
    raise ValueError(f"unknown block tag {tag!r}")


def encode_turn(blocks: list[Block] | tuple[Block, ...]) -> bytes:
    for block in blocks:
        if type(block) not in _ASSISTANT_KINDS:  # a caller bug: assistant turns hold only these
            raise TypeError(f"cannot record {type(block).__name__} in an assistant turn")
    return orjson.dumps([_VERSION, [_block(b) for b in blocks]])


def decode_turn(raw: bytes) -> tuple[Block, ...] | None:
    """The recorded blocks, or None for a record this version cannot read (treated as a miss)."""
    try:
        version, items = orjson.loads(raw)
        if version != _VERSION:
            return None
        blocks = tuple(_unblock(item) for item in items)
    except (orjson.JSONDecodeError, ValueError, TypeError, IndexError):
        return None
    if any(type(b) not in _ASSISTANT_KINDS for b in blocks):
        return None
    return blocks


def _messages(messages: tuple[Message, ...] | list[Message]) -> list[Any]:
    return [[m.role.value, [_block(b) for b in m.blocks]] for m in messages]


def encode_transcript(messages: tuple[Message, ...]) -> bytes:
    return orjson.dumps([_VERSION, _messages(messages)])


def decode_transcript(raw: bytes) -> tuple[Message, ...] | None:
    """A kept transcript, or None for a record this version cannot read."""
    try:
        version, messages = orjson.loads(raw)
        if version != _VERSION:
            return None
        return tuple(Message(Role(role), tuple(_unblock(b) for b in blocks)) for role, blocks in messages)
    except (orjson.JSONDecodeError, ValueError, TypeError, IndexError):
        return None


@dataclass(frozen=True, slots=True)
class Link:
    """One kept answer: the messages its request added (what it sent after the history it
    continued, and the answer), its place in the chain and the ids of its nearest ancestors."""

    depth: int  # how many kept answers come before it (0: it continued none)
    written: float  # wall-clock seconds when the record was (re)written: the chain refreshes old links
    ancestors: tuple[str, ...]  # answer ids, parent first, at most chain.ANCESTORS of them
    messages: tuple[Message, ...]


def encode_link(link: Link) -> bytes:
    return orjson.dumps(
        [_LINK_VERSION, link.depth, link.written, list(link.ancestors), _messages(link.messages)]
    )


def decode_link(raw: bytes) -> Link | None:
    """A kept answer, or None for a record this version cannot read. A whole-transcript record of
    the previous format reads as a link that continued nothing."""
    try:
        record = orjson.loads(raw)
        if record[0] == _VERSION:
            messages = decode_transcript(raw)
            return None if messages is None else Link(0, 0.0, (), messages)
        version, depth, written, ancestors, messages = record
        if version != _LINK_VERSION or type(depth) is not int or depth < 0:
            return None
        if not all(type(a) is str for a in ancestors) or (depth > 0) != bool(ancestors):
            return None
        return Link(
            depth,
            float(written),
            tuple(ancestors),
            tuple(Message(Role(role), tuple(_unblock(b) for b in blocks)) for role, blocks in messages),
        )
    except (orjson.JSONDecodeError, ValueError, TypeError, IndexError, KeyError):
        return None


@dataclass(frozen=True, slots=True)
class KeptItem:
    """One output item of a kept answer: the answer's id and the blocks the item was made of."""

    answer: str
    written: float  # wall-clock seconds when the record was (re)written, as a Link's
    blocks: tuple[Block, ...]


def encode_item(item: KeptItem) -> bytes:
    return orjson.dumps([_ITEM_VERSION, item.answer, item.written, [_block(b) for b in item.blocks]])


def decode_item(raw: bytes) -> KeptItem | None:
    """A kept item, or None for a record this version cannot read (treated as a miss)."""
    try:
        version, answer, written, blocks = orjson.loads(raw)
        if version != _ITEM_VERSION or type(answer) is not str:
            return None
        item = KeptItem(answer, float(written), tuple(_unblock(b) for b in blocks))
    except (orjson.JSONDecodeError, ValueError, TypeError, IndexError):
        return None
    if any(type(b) not in _ASSISTANT_KINDS for b in item.blocks):
        return None
    return item
