"""Anthropic Messages content: canonical messages and blocks as the API's content blocks (images,
documents, tool results with their media, thinking, and server-tool history replayed to its
issuer). The request around them is anthropic.py's."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from gateway.providers.base import EncodeError, parse_arguments
from gateway.providers.held_wire import HeldWire, Rendered
from gateway.transcript.model import (
    CacheControl,
    Document,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    ServerToolCall,
    ServerToolResult,
    Text,
    ToolCall,
    ToolResult,
)
from gateway.transcript.target import Target
from gateway.wire.anthropic_server import server_call_wire, wire_block, wire_citation

# Role's members, looked up once: an enum member's lookup costs ~75 ns, per message here
_ASSISTANT = Role.ASSISTANT
_SYSTEM = Role.SYSTEM


def cached(block: dict[str, Any], cache: CacheControl | None) -> dict[str, Any]:
    if cache is not None:
        control = {"type": "ephemeral"}
        if cache.ttl:
            control["ttl"] = cache.ttl
        block["cache_control"] = control
    return block


def _image(image: Image) -> dict[str, Any]:
    if image.url.startswith("data:"):
        header, sep, data = image.url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if not sep or encoding != "base64" or not media_type:
            raise EncodeError("image data URL must be base64 with a media type")
        out = {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    else:
        out = {"type": "image", "source": {"type": "url", "url": image.url}}
    return cached(out, image.cache)


def _document(document: Document) -> dict[str, Any]:
    source = document.source
    if source.startswith("data:"):
        header, sep, data = source[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if not sep or encoding != "base64":
            raise EncodeError("document data URL must be base64")
        if media_type == "text/plain":
            try:
                text = base64.b64decode(data, validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise EncodeError("a text/plain document must be base64 of UTF-8 text") from None
            wire = {"type": "text", "media_type": "text/plain", "data": text}
        elif media_type == "application/pdf":
            wire = {"type": "base64", "media_type": media_type, "data": data}
        else:
            raise EncodeError(f"Anthropic takes PDF and plain-text documents, not {media_type}")
    else:
        wire = {"type": "url", "url": source}
    out: dict[str, Any] = {"type": "document", "source": wire}
    if document.title:
        out["title"] = document.title
    return cached(out, document.cache)


def _citation(citation: Any, target: Target) -> dict[str, Any]:
    wire = wire_citation(citation.meta) if target.owns(citation.meta) else None
    if wire is None:
        raise EncodeError("another issuer's citation reached the encoder (repair renders it)")
    return wire


def _reasoning(block: Reasoning, target: Target) -> dict[str, Any]:
    meta = block.meta
    if meta is None or not target.owns(meta):
        raise EncodeError("reasoning without this target's continuity reached the Anthropic encoder")
    data = meta.data
    signature = data.get("signature")
    if signature:
        return {"type": "thinking", "thinking": block.text, "signature": signature}
    redacted = data.get("redacted")
    if redacted:
        return {"type": "redacted_thinking", "data": redacted}
    raise EncodeError("Anthropic reasoning meta holds neither a signature nor redacted data")


def _tool_result(block: ToolResult) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.call_id}
    if block.images or block.documents:
        # a blank text block is refused: whitespace-only content next to images carries nothing
        text = [{"type": "text", "text": block.content}] if block.content.strip() else []
        parts: list[dict[str, Any]] = text
        parts.extend(_image(image) for image in block.images)
        parts.extend(_document(document) for document in block.documents)
        out["content"] = parts
    elif block.content:
        out["content"] = block.content
    if block.is_error:
        out["is_error"] = True
    return cached(out, block.cache)


def _block(block: object, assistant: bool, target: Target) -> dict[str, Any] | None:
    """One canonical block as an Anthropic content block; None for empty text, which the API
    rejects and which carries nothing."""
    match block:
        case Text(text=text, cache=cache, citations=citations):
            if not text:
                return None
            out: dict[str, Any] = {"type": "text", "text": text}
            if citations:
                out["citations"] = [_citation(c, target) for c in citations]
            return cached(out, cache)
        case Image() if not assistant:
            return _image(block)
        case Document() if not assistant:
            return _document(block)
        case ToolResult() if not assistant:
            return _tool_result(block)
        case ToolCall(id=call_id, name=name, arguments=arguments, cache=cache) if assistant:
            if block.custom:
                raise EncodeError("custom (freeform) tool calls must be mapped to function calls by repair")
            call = {"type": "tool_use", "id": call_id, "name": name, "input": parse_arguments(arguments)}
            return cached(call, cache)
        case Reasoning() if assistant:
            return _reasoning(block, target)
        case ServerToolCall() if assistant:
            if not target.owns(block.meta):
                raise EncodeError("another issuer's server tool call reached the encoder (repair renders it)")
            return server_call_wire(block)
        case ServerToolResult() if assistant:
            wire = wire_block(block.meta) if target.owns(block.meta) else None
            if wire is None:
                raise EncodeError(
                    "another issuer's server tool result reached the encoder (repair renders it)"
                )
            return wire
        case _:
            side = "assistant" if assistant else "user"
            raise EncodeError(f"{type(block).__name__} block cannot appear in an Anthropic {side} message")


# each conversation's rendered messages, so that its next turn renders only what it adds
HELD = HeldWire(budget=16 << 20)


def messages_wire(request: Request, target: Target) -> Rendered:
    """One wire message per canonical message: repair (merge_user_turns, merge_assistant_runs)
    already made the roles alternate, with a turn's tool results before the user's own content.
    The JSON array, rendered (gateway/providers/held_wire.py): joined into the body that holds it
    (`Rendered.dumps`), or alone (`Rendered.text`)."""

    def encode(messages: tuple[Message, ...], start: int, out: list[dict[str, Any]]) -> None:
        for n in range(start, len(messages)):
            message = messages[n]
            if message.role is _SYSTEM:
                raise EncodeError(f"messages.{n}: a system message reached the encoder (repair moves it)")
            assistant = message.role is _ASSISTANT
            role = "assistant" if assistant else "user"
            # the message before is not a system message: it was encoded first (or held)
            if n and (messages[n - 1].role is _ASSISTANT) is assistant:
                raise EncodeError(f"messages.{n}: two {role} messages in a row (repair merges them)")
            wires = (_block(block, assistant, target) for block in message.blocks)
            content = [b for b in wires if b is not None]
            if not content:
                raise EncodeError(f"messages.{n}: an Anthropic message needs non-empty content")
            out.append({"role": role, "content": content})

    return HELD.rendered(request.messages, target, [], encode)
