"""Shape of an Anthropic Messages request's messages: each message's content blocks (text,
images, documents, tool use and results, thinking, server tools), with the API's pydantic-style
error paths (`messages.5.content.0.tool_use.id: ...`), and the `Invalid` every shape check raises.
The request's other fields are checked in `anthropic_shapes`. Messages marked "unverified" were not
confirmed against the live API and are the most plausible wording.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.simulators.base import Rejection

ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
USER_BLOCKS = ("text", "image", "document", "tool_result")
# server tools the API ran itself, replayed in the assistant turn that holds them
# (https://docs.claude.com/en/docs/agents-and-tools/tool-use/web-search-tool, "Response"; ...
# web-fetch-tool, code-execution-tool): a server_tool_use and its <name>_tool_result
SERVER_RESULTS = {
    "web_search": "web_search_tool_result",
    "web_fetch": "web_fetch_tool_result",
    "code_execution": "code_execution_tool_result",
    "bash_code_execution": "bash_code_execution_tool_result",
    "text_editor_code_execution": "text_editor_code_execution_tool_result",
}
SERVER_BLOCKS = ("server_tool_use", *SERVER_RESULTS.values())
ASSISTANT_BLOCKS = ("text", "thinking", "redacted_thinking", "tool_use", *SERVER_BLOCKS)
ALL_BLOCKS = (
    "text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", *SERVER_BLOCKS
)  # fmt: skip
# tool_result content: "text, image, or document" blocks
# (https://docs.claude.com/en/docs/agents-and-tools/tool-use/implement-tool-use)
TOOL_RESULT_PARTS = ("text", "image", "document")
IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# "images larger than 5 MB are rejected" through the API
# (https://docs.claude.com/en/docs/build-with-claude/vision, "Image size limits")
MAX_IMAGE_BYTES = 5 * 1024 * 1024
BLOCK_KEYS = {
    "text": frozenset(("type", "text", "cache_control", "citations")),
    "image": frozenset(("type", "source", "cache_control")),
    "document": frozenset(("type", "source", "title", "context", "citations", "cache_control")),
    "tool_use": frozenset(("type", "id", "name", "input", "cache_control")),
    "tool_result": frozenset(("type", "tool_use_id", "content", "is_error", "cache_control")),
    "thinking": frozenset(("type", "thinking", "signature")),
    "redacted_thinking": frozenset(("type", "data")),
    "server_tool_use": frozenset(("type", "id", "name", "input", "cache_control")),
    **{
        result: frozenset(("type", "tool_use_id", "content", "cache_control"))
        for result in SERVER_RESULTS.values()
    },
}
SERVER_ID = re.compile(r"^srvtoolu_[a-zA-Z0-9_]+$")
EMPTY_CONTENT = (
    "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
)


class Invalid(Exception):
    def __init__(self, message: str, status: int = 400, type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.rejection = Rejection(status=status, message=message, type=type)


def require_str(obj: dict, key: str, path: str) -> str:
    if key not in obj:
        raise Invalid(f"{path}.{key}: Field required")
    value = obj[key]
    if not isinstance(value, str):
        raise Invalid(f"{path}.{key}: Input should be a valid string")
    return value


def no_extra(obj: dict, allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            raise Invalid(
                f"{path}.{key}: Extra inputs are not permitted"
                if path
                else f"{key}: Extra inputs are not permitted"
            )


def message_blocks(message: Any, i: int, final: bool) -> list[dict]:
    """The message's content as a checked block list (a string is one text block)."""
    path = f"messages.{i}"
    if not isinstance(message, dict):
        raise Invalid(f"{path}: Input should be a valid dictionary")
    no_extra(message, frozenset(("role", "content")), path)
    if "role" not in message:
        raise Invalid(f"{path}.role: Field required")
    role = message["role"]
    if role not in ("user", "assistant"):
        raise Invalid(f"{path}.role: Input should be 'user' or 'assistant'")
    if "content" not in message:
        raise Invalid(f"{path}.content: Field required")
    content = message["content"]
    final_assistant = final and role == "assistant"
    if isinstance(content, str):
        if not content and not final_assistant:
            raise Invalid(EMPTY_CONTENT.format(i=i))
        blocks = [{"type": "text", "text": content}] if content else []
        if content and not final_assistant:
            _check_text(blocks[0], f"{path}.content")
    elif isinstance(content, list):
        if not content and not final_assistant:
            raise Invalid(EMPTY_CONTENT.format(i=i))
        blocks = content
        allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
        for j, block in enumerate(blocks):
            _check_block(block, f"{path}.content.{j}", role, allowed)
    else:
        raise Invalid(f"{path}.content: Input should be a valid string or a valid list")  # unverified
    if final_assistant and blocks and blocks[-1]["type"] == "text":
        text = blocks[-1]["text"]
        if text != text.rstrip():
            raise Invalid("messages: final assistant content cannot end with trailing whitespace")
    return blocks


def _check_block(block: Any, path: str, role: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(block, dict):
        raise Invalid(f"{path}: Input should be a valid dictionary")
    kind = block.get("type")
    if kind not in ALL_BLOCKS:
        expected = ", ".join(f"'{t}'" for t in ALL_BLOCKS)
        raise Invalid(
            f"{path}: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags: {expected}"
        )
    if kind not in allowed:
        # unverified wording; the API refuses these blocks in this role
        raise Invalid(f"{path}.type: `{kind}` blocks are not allowed in `{role}` messages")
    no_extra(block, BLOCK_KEYS[kind], f"{path}.{kind}")
    if kind == "text":
        _check_text(block, path)
    elif kind == "image":
        _check_image(block, path)
    elif kind == "document":
        _check_document(block, path)
    elif kind == "tool_use":
        tool_id = require_str(block, "id", f"{path}.tool_use")
        if not ID_PATTERN.match(tool_id):
            raise Invalid(f"{path}.tool_use.id: String should match pattern '{ID_PATTERN.pattern}'")
        require_str(block, "name", f"{path}.tool_use")
        if "input" not in block:
            raise Invalid(f"{path}.tool_use.input: Field required")
        if not isinstance(block["input"], dict):
            raise Invalid(f"{path}.tool_use.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        _check_tool_result(block, path)
    elif kind == "thinking":
        require_str(block, "thinking", f"{path}.thinking")
        require_str(block, "signature", f"{path}.thinking")
    elif kind == "redacted_thinking":
        require_str(block, "data", f"{path}.redacted_thinking")
    elif kind == "server_tool_use":
        tool_id = require_str(block, "id", f"{path}.server_tool_use")
        if not SERVER_ID.match(tool_id):
            raise Invalid(f"{path}.server_tool_use.id: String should match pattern '{SERVER_ID.pattern}'")
        if block.get("name") not in SERVER_RESULTS:
            names = ", ".join(f"'{n}'" for n in SERVER_RESULTS)
            raise Invalid(f"{path}.server_tool_use.name: Input should be {names}")
        if not isinstance(block.get("input"), dict):
            raise Invalid(f"{path}.server_tool_use.input: Input should be a valid dictionary")
    elif kind in SERVER_BLOCKS:
        tool_id = require_str(block, "tool_use_id", f"{path}.{kind}")
        if not SERVER_ID.match(tool_id):
            raise Invalid(f"{path}.{kind}.tool_use_id: String should match pattern '{SERVER_ID.pattern}'")
        if "content" not in block:
            raise Invalid(f"{path}.{kind}.content: Field required")
    else:  # pragma: no cover - ALL_BLOCKS is exhaustive
        raise AssertionError(kind)


def _check_text(block: dict, path: str) -> None:
    text = require_str(block, "text", f"{path}.text")
    if not text:
        raise Invalid("messages: text content blocks must be non-empty")
    if not text.strip():
        raise Invalid("messages: text content blocks must contain non-whitespace text")


def _check_image(block: dict, path: str) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise Invalid(f"{path}.image.source: Field required")
    kind = source.get("type")
    if kind == "base64":
        no_extra(source, frozenset(("type", "media_type", "data")), f"{path}.image.source.base64")
        if source.get("media_type") not in IMAGE_MEDIA_TYPES:
            raise Invalid(
                f"{path}.image.source.base64.media_type: Input should be 'image/jpeg', "
                "'image/png', 'image/gif' or 'image/webp'"
            )
        data = require_str(source, "data", f"{path}.image.source.base64")
        size = len(data) * 3 // 4
        if size > MAX_IMAGE_BYTES:
            raise Invalid(
                f"{path}.image.source.base64: image exceeds 5 MB maximum: {size} bytes > "
                f"{MAX_IMAGE_BYTES} bytes"
            )
    elif kind == "url":
        no_extra(source, frozenset(("type", "url")), f"{path}.image.source.url")
        require_str(source, "url", f"{path}.image.source.url")
    else:
        raise Invalid(
            f"{path}.image.source: Input tag '{kind}' found using 'type' does not match any of "
            "the expected tags: 'base64', 'url'"
        )


def _check_document(block: dict, path: str) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise Invalid(f"{path}.document.source: Field required")
    for key in ("title", "context"):
        if key in block and block[key] is not None and not isinstance(block[key], str):
            raise Invalid(f"{path}.document.{key}: Input should be a valid string")
    kind = source.get("type")
    where = f"{path}.document.source.{kind}"
    if kind == "base64":
        no_extra(source, frozenset(("type", "media_type", "data")), where)
        if source.get("media_type") != "application/pdf":
            raise Invalid(f"{where}.media_type: Input should be 'application/pdf'")
        require_str(source, "data", where)
    elif kind == "text":
        no_extra(source, frozenset(("type", "media_type", "data")), where)
        if source.get("media_type") != "text/plain":
            raise Invalid(f"{where}.media_type: Input should be 'text/plain'")
        require_str(source, "data", where)
    elif kind == "url":
        no_extra(source, frozenset(("type", "url")), where)
        require_str(source, "url", where)
    else:
        raise Invalid(
            f"{path}.document.source: Input tag '{kind}' found using 'type' does not match any of "
            "the expected tags: 'base64', 'text', 'url', 'content'"
        )


def _check_tool_result(block: dict, path: str) -> None:
    tool_use_id = require_str(block, "tool_use_id", f"{path}.tool_result")
    if not ID_PATTERN.match(tool_use_id):
        raise Invalid(f"{path}.tool_result.tool_use_id: String should match pattern '{ID_PATTERN.pattern}'")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        raise Invalid(f"{path}.tool_result.is_error: Input should be a valid boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise Invalid(f"{path}.tool_result.content: Input should be a valid string or a valid list")
    for k, part in enumerate(content):
        part_path = f"{path}.tool_result.content.{k}"
        if not isinstance(part, dict) or part.get("type") not in TOOL_RESULT_PARTS:
            kind = part.get("type") if isinstance(part, dict) else None
            raise Invalid(
                f"{part_path}: Input tag '{kind}' found using 'type' does not match any of the "
                "expected tags: 'text', 'image', 'document'"
            )
        no_extra(part, BLOCK_KEYS[part["type"]], f"{part_path}.{part['type']}")
        if part["type"] == "text":
            _check_text(part, part_path)
        elif part["type"] == "image":
            _check_image(part, part_path)
        else:
            _check_document(part, part_path)
