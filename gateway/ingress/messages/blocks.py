"""An Anthropic Messages request's messages as canonical messages (gateway/ingress/messages/
decode.py decodes the rest): system, user and assistant content blocks, tool results, images and
documents, and echoed server-tool blocks and citations.

Thinking signatures come back in two forms: the gateway's sealed token (reasoning another provider
issued; forged or edited ones are dropped and counted) or a raw Anthropic signature (issued by an
Anthropic target and handed to the client as is, so the history replays natively; its issuer scope
is unknown, like LiteLLM's echoed thinking_blocks).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.ingress.echo_formats import anthropic_redacted, anthropic_thinking
from gateway.ingress.errors import invalid
from gateway.ingress.messages import wire as w
from gateway.transcript.model import (
    ANY_ISSUER,
    Block,
    CacheControl,
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Role,
    Text,
    ToolCall,
    ToolResult,
)
from gateway.transcript.seal import Sealer
from gateway.wire.anthropic_server import (
    SERVER_TOOL_USE,
    citation,
    is_server_result,
    server_call,
    server_result,
)

ANTHROPIC = "anthropic"
SEALED_PREFIX = "gw1."


def _echoed(data: Mapping[str, Any]) -> Continuity:
    """Server-tool blocks and citations a client echoes: Anthropic issued them, to a scope the
    gateway cannot tell (like raw thinking signatures), so they replay to Anthropic targets."""
    return Continuity("client", ANY_ISSUER, ANTHROPIC, ANY_ISSUER, dict(data))


class Decoded:
    """What decoding produced beyond the Request: counted tokens and what the answer needs."""

    __slots__ = ("ignored_tokens", "display_omitted")

    def __init__(self) -> None:
        self.ignored_tokens = 0  # sealed signatures that did not verify (never forwarded)
        self.display_omitted = False  # thinking.display "omitted": reasoning text is not shown


# a message decoded: its role, the canonical messages it makes (a user message's tool results
# and content split apart; a system message's one, maybe without blocks), the echoed tokens that
# did not verify, and whether its content was empty (allowed only for a final assistant message)
MessageDecoded = tuple[str, tuple[Message, ...], int, bool]


def message_of(message: Any, where: str, sealer: Sealer) -> MessageDecoded:
    role = message.role
    empty = not message.content
    if empty:  # nothing to decode; whether that is allowed depends on the message's place
        return role, (), 0, True
    content = f"{where}.content"
    if role == "system":
        return role, (Message(Role.SYSTEM, tuple(_system_blocks(message.content, content))),), 0, False
    if role == "user":
        return role, tuple(_user(message.content, content)), 0, False
    out = Decoded()
    blocks = _assistant(message.content, content, sealer, out)
    return role, ((Message(Role.ASSISTANT, blocks),) if blocks else ()), out.ignored_tokens, False


def cache_of(control: w.CacheControlWire | None) -> CacheControl | None:
    return CacheControl(control.ttl) if control is not None else None


def system_of(system: str | list[w.TextBlock] | None) -> list[Text]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Text(system)] if system else []
    return [Text(b.text, cache=cache_of(b.cache_control)) for b in system]


def _system_blocks(content: str | list, where: str) -> list[Text]:
    if isinstance(content, str):
        return [Text(content)] if content else []
    out: list[Text] = []
    for j, block in enumerate(content):
        if type(block) is not w.TextBlock:
            raise invalid(f"a system message holds text blocks only, got {block.type!r}", f"{where}.{j}.type")
        out.append(Text(block.text, cache=cache_of(block.cache_control)))
    return out


def _image(block: w.ImageBlock, where: str) -> Image:
    source = block.source
    if type(source) is w.Base64Source:
        url = f"data:{source.media_type};base64,{source.data}"
    elif type(source) is w.URLSource:
        url = source.url
    else:
        raise invalid(f"image source type {source.type!r} is not supported (send base64 or url)", where)
    return Image(url, cache=cache_of(block.cache_control))


def _document(block: w.DocumentBlock, where: str) -> Document:
    source = block.source
    if type(source) is w.Base64Source:
        url, media_type = f"data:{source.media_type};base64,{source.data}", source.media_type
    elif type(source) is w.PlainTextSource:
        data = base64.b64encode(source.data.encode()).decode()
        url, media_type = f"data:text/plain;base64,{data}", "text/plain"
    elif type(source) is w.URLSource:
        url, media_type = source.url, "application/pdf"
    else:
        raise invalid(
            f"document source type {source.type!r} is not supported (send base64, text or url)", where
        )
    return Document(url, media_type, block.title, cache_of(block.cache_control))


def _user(content: str | list, where: str) -> list[Message]:
    """A user message: its tool results become TOOL messages and its own content USER messages, in
    the order the client gave them (repair merges and orders them per target)."""
    if isinstance(content, str):
        return [Message(Role.USER, (Text(content),))]
    runs: list[tuple[Role, list[Block]]] = []
    for j, block in enumerate(content):
        path = f"{where}.{j}"
        t = type(block)
        if t is w.ToolResultBlock:
            role, item = Role.TOOL, _tool_result(block, path)
        elif t is w.TextBlock:
            role, item = Role.USER, Text(block.text, cache=cache_of(block.cache_control))
        elif t is w.ImageBlock:
            role, item = Role.USER, _image(block, f"{path}.source")
        elif t is w.DocumentBlock:
            role, item = Role.USER, _document(block, f"{path}.source")
        else:
            raise invalid(f"{block.type!r} blocks are not allowed in user messages", f"{path}.type")
        if runs and runs[-1][0] is role:
            runs[-1][1].append(item)
        else:
            runs.append((role, [item]))
    return [Message(role, tuple(blocks)) for role, blocks in runs]


def _tool_result(block: w.ToolResultBlock, where: str) -> ToolResult:
    content = block.content
    if content is None or isinstance(content, str):
        return ToolResult(
            block.tool_use_id, content or "", block.is_error, cache=cache_of(block.cache_control)
        )
    texts: list[str] = []
    images: list[Image] = []
    documents: list[Document] = []
    for k, part in enumerate(content):
        path = f"{where}.content.{k}"
        t = type(part)
        if t is w.TextBlock:
            texts.append(part.text)
        elif t is w.ImageBlock:
            images.append(_image(part, f"{path}.source"))
        elif t is w.DocumentBlock:
            documents.append(_document(part, f"{path}.source"))
        elif t is w.ToolReferenceBlock:
            # the tool's definition is in `tools`, which the gateway sends whole to every provider
            texts.append(f"Tool {part.tool_name} loaded.")
        else:
            raise invalid(f"{part.type!r} blocks are not supported inside a tool_result", f"{path}.type")
    return ToolResult(
        block.tool_use_id,
        "\n".join(texts),
        block.is_error,
        tuple(images),
        cache_of(block.cache_control),
        tuple(documents),
    )


def _assistant(content: str | list, where: str, sealer: Sealer, out: Decoded) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (Text(content),) if content else ()
    blocks: list[Block] = []
    for j, block in enumerate(content):
        t = type(block)
        if t is w.TextBlock:
            citations = tuple(citation(c, _echoed) for c in block.citations or ())
            blocks.append(Text(block.text, cache=cache_of(block.cache_control), citations=citations))
        elif t is w.OtherBlock and block.type == SERVER_TOOL_USE:
            raw = block.model_dump()
            if not isinstance(raw.get("id"), str) or not isinstance(raw.get("name"), str):
                raise invalid("a server_tool_use block needs an `id` and a `name`", f"{where}.{j}")
            blocks.append(server_call(raw, _echoed))
        elif t is w.OtherBlock and is_server_result(block.type):
            raw = block.model_dump()
            if not isinstance(raw.get("tool_use_id"), str):
                raise invalid("Field required", f"{where}.{j}.tool_use_id")
            blocks.append(server_result(raw, _echoed))
        elif t is w.ToolUseBlock:
            arguments = orjson.dumps(block.input).decode()
            blocks.append(ToolCall(block.id, block.name, arguments, cache=cache_of(block.cache_control)))
        elif t is w.ThinkingBlock:
            blocks.append(_thinking_block(block, sealer, out))
        elif t is w.RedactedThinkingBlock:
            if block.data.startswith(SEALED_PREFIX):
                meta = sealer.unseal(block.data)
                if meta is None:
                    out.ignored_tokens += 1
                else:
                    blocks.append(Reasoning("", meta))
            elif block.data:
                blocks.append(anthropic_redacted(block.data))
        else:
            raise invalid(f"{block.type!r} blocks are not allowed in assistant messages", f"{where}.{j}.type")
    return tuple(blocks)


def _thinking_block(block: w.ThinkingBlock, sealer: Sealer, out: Decoded) -> Reasoning:
    signature = block.signature
    if signature.startswith(SEALED_PREFIX):
        meta = sealer.unseal(signature)
        if meta is None:  # forged, edited, or sealed under another deployment's secret
            out.ignored_tokens += 1
        return Reasoning(block.thinking, meta)
    if signature:
        return anthropic_thinking(block.thinking, signature)
    return Reasoning(block.thinking, None)
