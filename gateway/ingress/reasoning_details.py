"""`reasoning_details` on Chat Completions messages (OpenRouter's convention) carrying the
gateway's continuity meta, so stateless clients that keep the message can send it back.

Entries, one per continuity-bearing block of an assistant message, `index` = the block's position:
- a Reasoning block: {"type": "reasoning.text", "text", "signature": <sealed meta>, "format", "index"}
  (reasoning that has no readable text: "reasoning.encrypted" with "data" instead of text)
- a Text or ToolCall block that carries meta (Gemini signatures): {"type": "reasoning.encrypted",
  "data": <sealed meta>, "format", "index", "id": <tool call id, or null for text>}
The meta is sealed and authenticated (gateway.transcript.seal): this module never reads
provider-private data, and a client cannot forge it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from gateway.transcript.model import Block, Continuity, Reasoning, Text, ToolCall
from gateway.transcript.seal import Sealer

_FORMAT_SUFFIX = "-gw1"


def encode_details(blocks: list[Block] | tuple[Block, ...], sealer: Sealer) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        t = type(block)
        if t is Reasoning:
            if block.meta is None and not block.text:
                continue
            fmt = (block.meta.kind if block.meta else "unknown") + _FORMAT_SUFFIX
            if block.text or block.meta is None:
                entry = {"type": "reasoning.text", "text": block.text, "format": fmt, "index": index}
                if block.meta is not None:
                    entry["signature"] = sealer.seal(block.meta)
            else:
                entry = {
                    "type": "reasoning.encrypted",
                    "data": sealer.seal(block.meta),
                    "format": fmt,
                    "index": index,
                }
            out.append(entry)
        elif (t is Text or t is ToolCall) and block.meta is not None:
            out.append(
                {
                    "type": "reasoning.encrypted",
                    "data": sealer.seal(block.meta),
                    "format": block.meta.kind + _FORMAT_SUFFIX,
                    "index": index,
                    "id": block.id if t is ToolCall else None,
                }
            )
    return out


def plain_blocks(text: str, calls: Sequence[ToolCall], reasoning_content: str | None) -> tuple[Block, ...]:
    """`assistant_blocks` of a message with nothing placed by index (no details, no echoed
    reasoning): the reasoning, the text, the calls."""
    if reasoning_content:
        reasoning = Reasoning(reasoning_content, None)
        head: tuple[Block, ...] = (reasoning, Text(text)) if text else (reasoning,)
    else:
        head = (Text(text),) if text else ()
    return (*head, *calls) if calls else head


def assistant_blocks(
    text: str,
    calls: list[ToolCall],
    reasoning_content: str | None,
    details: list[dict[str, Any]] | None,
    sealer: Sealer,
    echoed_reasoning: list[Reasoning] | None = None,
) -> tuple[tuple[Block, ...], int]:
    """Rebuild an assistant message's ordered blocks from what a client sent back.

    `reasoning_details` win; reasoning echoed in another format (`echoed_reasoning`) comes next;
    plain `reasoning_content` last. Returns the blocks and how many echoed tokens were ignored
    because they did not parse."""
    if not details and not echoed_reasoning:
        return plain_blocks(text, calls, reasoning_content), 0
    ignored = 0
    reasoning_at: dict[int, Reasoning] = {}
    text_meta_at: dict[int, Continuity] = {}
    call_meta: dict[str, Continuity] = {}
    for entry in details or ():
        if not isinstance(entry, dict):
            raise ValueError("each reasoning_details entry must be an object")
        kind = entry.get("type")
        index = entry.get("index")
        if not isinstance(index, int) or index < 0 or index > 10_000:
            index = None
        if kind == "reasoning.text":
            token = entry.get("signature")
            meta = sealer.unseal(token) if token is not None else None
            if token is not None and meta is None:
                ignored += 1
            body = entry.get("text")
            _place(reasoning_at, index, Reasoning(body if isinstance(body, str) else "", meta))
        elif kind == "reasoning.encrypted":
            meta = sealer.unseal(entry.get("data"))
            if meta is None:
                ignored += 1
                continue
            call_id = entry.get("id")
            if isinstance(call_id, str) and call_id:
                call_meta[call_id] = meta
            elif "id" in entry and index is not None:
                text_meta_at[index] = meta
            else:
                _place(reasoning_at, index, Reasoning("", meta))
        elif kind == "reasoning.summary":
            summary = entry.get("summary")
            if isinstance(summary, str):
                _place(reasoning_at, index, Reasoning(summary, None))
        else:
            ignored += 1  # another gateway's or provider's format we do not understand

    if not reasoning_at and echoed_reasoning:
        reasoning_at = dict(enumerate(echoed_reasoning))
    if not reasoning_at and reasoning_content:
        reasoning_at[0] = Reasoning(reasoning_content, None)

    visible: deque[Block] = deque()
    if text:
        visible.append(Text(text))
    for call in calls:
        meta = call_meta.get(call.id)
        visible.append(ToolCall(call.id, call.name, call.arguments, meta) if meta else call)

    blocks: list[Block] = []
    last = max([*reasoning_at, *text_meta_at], default=-1)
    position = 0
    while visible or position <= last:
        if position in reasoning_at:
            blocks.append(reasoning_at[position])
        elif position in text_meta_at:
            meta = text_meta_at[position]
            if visible and type(visible[0]) is Text:
                blocks.append(Text(visible.popleft().text, meta))
            else:
                blocks.append(Text("", meta))
        elif visible:
            blocks.append(visible.popleft())
        position += 1
    return tuple(blocks), ignored


def _place(slots: dict[int, Reasoning], index: int | None, block: Reasoning) -> None:
    if index is None or index in slots:
        index = max(slots, default=-1) + 1
    slots[index] = block
