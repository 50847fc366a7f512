"""Images and documents, placed where the target's family takes them (its MediaRule).

- An image the model cannot read (no vision, a media type or size the family refuses) and a
  document the family cannot take become a text placeholder saying what was left out
  (`media_as_placeholder`): the provider never sees a request it would refuse for it.
- A tool's images and documents stay inside its result (INLINE), move to a user message right
  after the turn's results (AFTER: `tool_result_media_moved`; the result says so), or become a
  placeholder (NONE). A plain-text document a result cannot hold becomes part of its text.

Pure and idempotent: what it leaves behind is media the target takes, where it takes it.
"""

from __future__ import annotations

import base64
import binascii

from gateway.repair.report import Repair
from gateway.transcript.model import Block, Document, Image, Message, Role, Text, ToolResult, replace
from gateway.transcript.target import Capabilities, MediaPlacement, MediaRule, Target

MOVED_NOTE = "(the output of this tool continues in the next message)"
PDF = "application/pdf"
TEXT = "text/plain"


def _data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a base64 data URL, else None."""
    if not url.startswith("data:"):
        return None
    header, sep, data = url[5:].partition(",")
    media_type, _, encoding = header.partition(";")
    if not sep or encoding != "base64":
        return None
    return media_type, data


def plain_text(document: Document) -> str | None:
    """A plain-text document's text, None for any other (or one that is not valid base64 UTF-8:
    the encoder reports that one)."""
    if document.media_type != TEXT:
        return None
    parsed = _data_url(document.source)
    if parsed is None:
        return None
    try:
        return base64.b64decode(parsed[1], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def image_problem(image: Image, rule: MediaRule, target: Target) -> str | None:
    """Why `target` cannot take `image`, or None when it can."""
    if not rule.sees_images(target.model):
        return f"{target.model} does not take image input"
    parsed = _data_url(image.url)
    if parsed is None:
        return None  # by URL: the provider fetches it
    media_type, data = parsed
    if media_type not in rule.image_types:
        return f"{target.kind} does not take {media_type or 'untyped'} images"
    size = len(data) * 3 // 4
    if rule.max_image_bytes is not None and size > rule.max_image_bytes:
        return f"{size} bytes is over {target.kind}'s limit of {rule.max_image_bytes} per image"
    return None


def document_problem(document: Document, rule: MediaRule, target: Target) -> str | None:
    if plain_text(document) is not None:
        return None  # text everywhere
    inline = document.source.startswith("data:")
    if document.media_type != PDF:
        return f"{target.kind} does not take {document.media_type} documents"
    if inline and not rule.pdf_data:
        return f"{target.kind} does not take PDF data"
    if not inline and not rule.document_urls:
        return f"{target.kind} does not take documents by URL"
    return None


def placeholder(block: Image | Document, why: str) -> str:
    if type(block) is Image:
        return f"[image omitted: {why}]"
    title = f" {block.title!r}" if block.title else ""
    return f"[document{title} ({block.media_type}) omitted: {why}]"


def place_media(
    messages: tuple[Message, ...], target: Target, caps: Capabilities
) -> tuple[tuple[Message, ...], list[Repair]]:
    rule = caps.media
    if not any(_has_media(m) for m in messages):
        return messages, []
    repairs: list[Repair] = []
    out: list[Message] = []
    after: list[Block] = []  # media moved out of a run of tool messages: they follow the run
    for message in messages:
        if after and message.role is not Role.TOOL:
            out.append(Message(Role.USER, tuple(after)))
            after = []
        if message.role is Role.USER or message.role is Role.TOOL:
            blocks, moved = _blocks(message.blocks, rule, target, repairs)
            out.append(message if blocks == message.blocks else Message(message.role, blocks))
            after.extend(moved)
        else:
            out.append(message)
    if after:
        out.append(Message(Role.USER, tuple(after)))
    if not repairs:
        return messages, []
    return tuple(out), repairs


def _has_media(message: Message) -> bool:
    for block in message.blocks:
        t = type(block)
        if t is Image or t is Document or (t is ToolResult and (block.images or block.documents)):
            return True
    return False


def _blocks(
    blocks: tuple[Block, ...], rule: MediaRule, target: Target, repairs: list[Repair]
) -> tuple[tuple[Block, ...], list[Block]]:
    """A user or tool message's blocks for the target, and the media to put after it."""
    kept: list[Block] = []
    moved: list[Block] = []
    for block in blocks:
        t = type(block)
        if t is Image or t is Document:
            why = image_problem(block, rule, target) if t is Image else document_problem(block, rule, target)
            if why is None:
                kept.append(block)
            else:
                repairs.append(Repair("media_as_placeholder", why))
                kept.append(Text(placeholder(block, why), cache=block.cache))
        elif t is ToolResult and (block.images or block.documents):
            kept.append(_tool_result(block, rule, target, repairs, moved))
        else:
            kept.append(block)
    return tuple(kept), moved


def _tool_result(
    result: ToolResult, rule: MediaRule, target: Target, repairs: list[Repair], moved: list[Block]
) -> ToolResult:
    notes: list[str] = []
    images: list[Image] = []
    documents: list[Document] = []
    go_after = False
    for image in result.images:
        why = image_problem(image, rule, target)
        if why is None and rule.tool_result_images is MediaPlacement.NONE:
            why = f"{target.kind} takes no images from tools"
        if why is not None:
            repairs.append(Repair("media_as_placeholder", why))
            notes.append(placeholder(image, why))
        elif rule.tool_result_images is MediaPlacement.INLINE:
            images.append(image)
        else:
            moved.append(image)
            go_after = True
    for document in result.documents:
        text = plain_text(document)
        why = document_problem(document, rule, target)
        placement = rule.tool_result_documents
        if text is not None and placement is not MediaPlacement.INLINE:
            repairs.append(Repair("tool_result_media_moved", "a plain-text document as the result's text"))
            notes.append(text)
            continue
        if why is None and placement is MediaPlacement.NONE:
            why = f"{target.kind} takes no documents from tools"
        if why is not None:
            repairs.append(Repair("media_as_placeholder", why))
            notes.append(placeholder(document, why))
        elif placement is MediaPlacement.INLINE:
            documents.append(document)
        else:
            moved.append(document)
            go_after = True
    if go_after:
        repairs.append(
            Repair("tool_result_media_moved", f"to a user message after the results ({target.kind})")
        )
        notes.append(MOVED_NOTE)
    content = "\n".join([result.content, *notes]) if result.content else "\n".join(notes)
    return replace(result, content=content, images=tuple(images), documents=tuple(documents))
