"""Canonical answers as Responses output items and Response objects (shared by the streamed and
the whole answer, so both give the same items and ids).

Item ids are stable: a function call's item id derives from its call id, the others from the
answer's id and the item's position, and OpenAI's own reasoning keeps its id.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from gateway.ingress.responses.tokens import (
    carrier_token,
    compaction_token,
    reasoning_id,
    reasoning_summary,
    reasoning_token,
)
from gateway.ingress.responses.tools import ToolNames
from gateway.transcript.events import CONTEXT_OVERFLOW, ErrorCategory, UpstreamError
from gateway.transcript.model import (
    Block,
    Citation,
    Reasoning,
    ServerToolCall,
    ServerToolResult,
    StopReason,
    Text,
    ToolCall,
    Usage,
)
from gateway.transcript.seal import Sealer
from gateway.wire.openai_server import wire_annotation, wire_item

CALL_ID_PREFIX = "call_"


@dataclass(frozen=True, slots=True)
class Answering:
    """What answering a Responses request needs from its decoding."""

    shell: dict[str, Any]  # the request's fields every Response object echoes
    names: ToolNames
    summaries: bool  # the client asked for reasoning summaries (else reasoning is `content`)
    encrypted: bool  # the client asked for reasoning.encrypted_content
    compaction: bool = False  # answer with exactly one compaction item (a summary of the input)


def base_of(reply_id: str) -> str:
    return reply_id.removeprefix("resp_")


def message_id(base: str, index: int) -> str:
    return f"msg_{base}_{index}"


def call_item_id(call_id: str, custom: bool) -> str:
    prefix = "ctc_" if custom else "fc_"
    if call_id.startswith(CALL_ID_PREFIX) and call_id[len(CALL_ID_PREFIX) :].isalnum():
        return prefix + call_id[len(CALL_ID_PREFIX) :]
    return prefix + hashlib.sha256(call_id.encode()).hexdigest()[:24]


def carrier_id(base: str) -> str:
    return f"rs_{base}_c"


def reasoning_item_id(block_id: str, base: str, index: int) -> str:
    return block_id or f"rs_{base}_{index}"


def output_text(text: str, annotations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []}


def annotations(citations: tuple[Citation, ...]) -> list[dict[str, Any]]:
    """OpenAI's own annotations as it sent them (textual.py made every other citation text)."""
    out = []
    for citation in citations:
        wire = wire_annotation(citation.meta)
        if wire is None:
            raise TypeError("a citation of another issuer reached the Responses encoder")
        out.append(wire)
    return out


def server_item(call: ServerToolCall) -> dict[str, Any]:
    """OpenAI's own web/file search item as it sent it."""
    item = wire_item(call.meta)
    if item is None:
        raise TypeError("a server tool call of another issuer reached the Responses encoder")
    return item


def refusal_part(text: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": text}


def message_item(
    item_id: str,
    text: str,
    status: str = "completed",
    refusal: bool = False,
    notes: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    part = refusal_part(text) if refusal else output_text(text, notes)
    content = [part] if text or status == "completed" else []
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


def reasoning_item(
    block: Reasoning, item_id: str, answering: Answering, sealer: Sealer, status: str = "completed"
) -> dict[str, Any]:
    item: dict[str, Any] = {"id": item_id, "type": "reasoning"}
    native = reasoning_summary(block)
    if native is not None:
        item["summary"] = [{"type": "summary_text", "text": s} for s in native]
    elif answering.summaries:
        item["summary"] = [{"type": "summary_text", "text": block.text}] if block.text else []
    else:
        item["summary"] = []
        if block.text:
            item["content"] = [{"type": "reasoning_text", "text": block.text}]
    if answering.encrypted:
        token = reasoning_token(block.meta, sealer)
        if token is not None:
            item["encrypted_content"] = token
    item["status"] = status
    return item


def call_item(
    call_id: str, name: str, payload: str, custom: bool, names: ToolNames, status: str
) -> dict[str, Any]:
    namespace, client_name = names.client(name)
    item: dict[str, Any] = {
        "id": call_item_id(call_id, custom),
        "type": "custom_tool_call" if custom else "function_call",
        "status": status,
        "call_id": call_id,
        "name": client_name,
        "input" if custom else "arguments": payload,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def carrier_item(
    blocks: list[Block], base: str, answering: Answering, sealer: Sealer
) -> dict[str, Any] | None:
    """The reasoning item carrying the turn's text and call continuity (tokens)."""
    if not answering.encrypted:
        return None
    token = carrier_token(blocks, sealer)
    if token is None:
        return None
    return {"id": carrier_id(base), "type": "reasoning", "summary": [], "encrypted_content": token}


def compaction_item(base: str, summary: str, sealer: Sealer) -> dict[str, Any]:
    return {"id": f"cmp_{base}", "type": "compaction", "encrypted_content": compaction_token(summary, sealer)}


def item_blocks(blocks: list[Block] | tuple[Block, ...], base: str) -> list[tuple[str, tuple[Block, ...]]]:
    """Every output item of an answer, in order, as its id and the blocks it is made of: the one
    place item ids are given (the whole answer here, the stream alike in stream.py), and what a
    later `item_reference` to the id puts back."""
    items: list[tuple[str, tuple[Block, ...]]] = []
    for n, block in enumerate(blocks):
        t = type(block)
        if t is Reasoning:
            items.append((reasoning_item_id(reasoning_id(block.meta) or "", base, len(items)), (block,)))
        elif t is Text:
            if block.text:
                items.append((message_id(base, len(items)), (block,)))
        elif t is ServerToolCall:
            # OpenAI's search item is its call and its result at once
            result = next(
                (b for b in blocks[n + 1 :] if type(b) is ServerToolResult and b.call_id == block.id), None
            )
            group = (block,) if result is None else (block, result)
            items.append((server_item(block).get("id") or block.id, group))
        elif t is ServerToolResult:
            pass  # it went out with its call
        elif t is ToolCall:
            items.append((call_item_id(block.id, block.custom), (block,)))
        else:  # pragma: no cover - assistant turns hold only these kinds
            raise TypeError(f"unexpected block in an assistant turn: {block!r}")
    return items


def output_items(
    blocks: list[Block], base: str, answering: Answering, sealer: Sealer, status: str
) -> list[dict]:
    """Every output item of an answer, in order."""
    items: list[dict[str, Any]] = []
    for item_id, group in item_blocks(blocks, base):
        block = group[0]
        t = type(block)
        if t is Reasoning:
            items.append(reasoning_item(block, item_id, answering, sealer))
        elif t is Text:
            notes = annotations(block.citations)
            items.append(message_item(item_id, block.text, status, block.refusal, notes))
        elif t is ServerToolCall:
            items.append(server_item(block))
        else:
            assert t is ToolCall
            items.append(
                call_item(block.id, block.name, block.arguments, block.custom, answering.names, "completed")
            )
    carrier = carrier_item(blocks, base, answering, sealer)
    if carrier is not None:
        items.append(carrier)
    return items


def usage_json(usage: Usage | None) -> dict[str, Any]:
    usage = usage or Usage()
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


# stop reason -> (status, incomplete_details reason)
_STATUS: dict[StopReason, tuple[str, str | None]] = {
    StopReason.END_TURN: ("completed", None),
    StopReason.TOOL_CALLS: ("completed", None),
    StopReason.STOP_SEQUENCE: ("completed", None),
    StopReason.REFUSAL: ("completed", None),
    StopReason.PAUSE_TURN: ("completed", None),
    StopReason.MAX_TOKENS: ("incomplete", "max_output_tokens"),
    StopReason.CONTENT_FILTER: ("incomplete", "content_filter"),
    StopReason.ERROR: ("failed", None),
}


def status_of(stop: StopReason) -> tuple[str, str | None]:
    return _STATUS[stop]


# upstream failure -> the Responses error code clients act on (Codex: context_length_exceeded,
# insufficient_quota, rate_limit_exceeded)
_ERROR_CODES = {
    ErrorCategory.RATE_LIMIT: "rate_limit_exceeded",
    ErrorCategory.QUOTA: "insufficient_quota",
    ErrorCategory.TOO_LARGE: "context_length_exceeded",
    ErrorCategory.OVERLOADED: "server_is_overloaded",
    ErrorCategory.INVALID_REQUEST: "invalid_prompt",
    ErrorCategory.CONTINUITY: "invalid_prompt",
    ErrorCategory.PAIRING: "invalid_prompt",
}
ERROR_FINISH = UpstreamError(ErrorCategory.SERVER, "the provider ended its answer with an error")


def error_code(error: UpstreamError) -> str:
    if error.code == CONTEXT_OVERFLOW:  # whichever family overflowed, in whatever category
        return CONTEXT_OVERFLOW
    return _ERROR_CODES.get(error.category, "server_error")


def response_json(
    answering: Answering,
    reply_id: str,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None,
    *,
    incomplete: str | None = None,
    error: UpstreamError | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"id": reply_id, "object": "response", "created_at": created, "status": status}
    body["error"] = {"code": error_code(error), "message": error.message} if error is not None else None
    body["incomplete_details"] = {"reason": incomplete} if incomplete else None
    body.update(answering.shell)
    body["output"] = output
    body["usage"] = usage_json(usage) if status != "in_progress" else None
    return body
