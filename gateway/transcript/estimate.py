"""A provider-independent estimate of a request's input tokens, for when no provider has counted
them (a stream's `message_start` before the provider reported usage, `count_tokens` for a family
without a count endpoint).

The rule (documented in README "Claude Code through the gateway"): one token per 4 characters of
text - system blocks, every message's text, reasoning, tool-call arguments and tool results, and
each tool definition as its JSON (name, description, input schema) - plus 4 tokens per message,
1600 per image (Anthropic's figure for an image at the size limit) and, for documents, the text of
a plain-text document or 1 token per 2 bytes of any other (a PDF's pages cost text plus images).
"""

from __future__ import annotations

import orjson

from gateway.transcript.model import (
    Document,
    Image,
    Reasoning,
    Request,
    ServerToolCall,
    ServerToolResult,
    Text,
    ToolCall,
    ToolResult,
)

CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 4
IMAGE_TOKENS = 1600
BYTES_PER_DOCUMENT_TOKEN = 2


def _document(block: Document) -> int:
    header, sep, data = block.source.partition(",")
    if not sep or not header.startswith("data:"):
        return IMAGE_TOKENS  # a URL: its size is unknown here
    size = len(data) * 3 // 4  # base64 -> bytes
    if block.media_type == "text/plain":
        return size // CHARS_PER_TOKEN
    return size // BYTES_PER_DOCUMENT_TOKEN


def estimate_input_tokens(request: Request) -> int:
    chars = sum(len(b.text) for b in request.system)
    tokens = 0
    for message in request.messages:
        tokens += MESSAGE_TOKENS
        for block in message.blocks:
            t = type(block)
            if t is Text or t is Reasoning:
                chars += len(block.text)
            elif t is ToolCall:
                chars += len(block.name) + len(block.arguments)
            elif t is ToolResult:
                chars += len(block.content)
                tokens += IMAGE_TOKENS * len(block.images) + sum(_document(d) for d in block.documents)
            elif t is Image:
                tokens += IMAGE_TOKENS
            elif t is Document:
                tokens += _document(block)
            elif t is ServerToolCall:
                chars += len(block.name) + len(block.input)
            elif t is ServerToolResult:
                # what a model reads of it: the sources and any readable text (encrypted content
                # counts on the issuer's own bill, which the estimate cannot see)
                chars += len(block.text) + sum(len(s.url) + len(s.title) for s in block.sources)
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description) + len(orjson.dumps(tool.parameters))
    for hosted in request.hosted_tools:
        chars += len(orjson.dumps(hosted.spec))
    return max(1, tokens + chars // CHARS_PER_TOKEN)
