"""Shape of an Anthropic Messages request: fields, types and blocks, with the API's pydantic-style
error paths (`messages.5.content.0.tool_use.id: ...`). Messages marked "unverified" were not
confirmed against the live API and are the most plausible wording.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.simulators.base import Rejection

ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
# unverified: the documented limit for custom tool names (64 in some docs, 128 in others)
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
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
THINKING_DISPLAYS = ("summarized", "omitted")
# Anthropic-defined tools (type -> the name the API requires); the simulator accepts their
# definitions but never calls them
SERVER_TOOLS = {
    "web_search_20250305": "web_search",
    "web_fetch_20250910": "web_fetch",
    "code_execution_20250825": "code_execution",
    "bash_20250124": "bash",
    "text_editor_20250728": "str_replace_based_edit_tool",
}
SERVER_TOOL_KEYS = frozenset(
    (
        "type", "name", "cache_control", "max_uses", "allowed_domains", "blocked_domains",
        "user_location", "citations", "max_content_tokens", "max_characters",
    )
)  # fmt: skip

TOP_LEVEL_KEYS = frozenset(
    (
        "model",
        "messages",
        "max_tokens",
        "system",
        "metadata",
        "stop_sequences",
        "stream",
        "temperature",
        "top_k",
        "top_p",
        "tools",
        "tool_choice",
        "thinking",
        "service_tier",
        "container",
        "context_management",
        "mcp_servers",
        "output_config",
        "output_format",
    )
)
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
TOOL_KEYS = frozenset(("type", "name", "description", "input_schema", "cache_control", "strict"))
EMPTY_CONTENT = (
    "messages.{i}: all messages must have non-empty content except for the optional final assistant message"
)
EXTENDED_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


class Invalid(Exception):
    def __init__(self, message: str, status: int = 400, type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.rejection = Rejection(status=status, message=message, type=type)


def check_shape(body: Any) -> tuple[bool, list[dict], list[list[dict]]]:
    """(thinking enabled, messages, each message's content as a checked block list)."""
    if not isinstance(body, dict):
        raise Invalid("Input should be a valid dictionary")  # unverified
    _no_extra(body, TOP_LEVEL_KEYS, "")
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            raise Invalid(f"{key}: Field required")
    if not isinstance(body["model"], str):
        raise Invalid("model: Input should be a valid string")
    max_tokens = body["max_tokens"]
    if not _is_int(max_tokens):
        raise Invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        raise Invalid("max_tokens: Input should be greater than or equal to 1")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise Invalid("stream: Input should be a valid boolean")
    _check_system(body.get("system"))
    _check_sampling(body)
    thinking = _check_thinking_config(body.get("thinking"), max_tokens)
    if thinking:
        _check_sampling_with_thinking(body)
    tool_names = _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"), tool_names, thinking, "tools" in body)
    messages = body["messages"]
    if not isinstance(messages, list):
        raise Invalid("messages: Input should be a valid list")
    if not messages:
        raise Invalid("messages: at least one message is required")  # unverified
    return thinking, messages, [_message_blocks(m, i, i == len(messages) - 1) for i, m in enumerate(messages)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _require_str(obj: dict, key: str, path: str) -> str:
    if key not in obj:
        raise Invalid(f"{path}.{key}: Field required")
    value = obj[key]
    if not isinstance(value, str):
        raise Invalid(f"{path}.{key}: Input should be a valid string")
    return value


def _no_extra(obj: dict, allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            raise Invalid(
                f"{path}.{key}: Extra inputs are not permitted"
                if path
                else f"{key}: Extra inputs are not permitted"
            )


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise Invalid("system: Input should be a valid list")
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise Invalid(f"system.{j}.type: Input should be 'text'")
        _no_extra(block, BLOCK_KEYS["text"], f"system.{j}")
        _require_str(block, "text", f"system.{j}")


def _check_sampling(body: dict) -> None:
    temperature = body.get("temperature")
    if temperature is not None:
        if not _is_number(temperature):
            raise Invalid("temperature: Input should be a valid number")
        if not 0 <= temperature <= 1:
            raise Invalid(
                "temperature: Input should be less than or equal to 1"
                if temperature > 1
                else "temperature: Input should be greater than or equal to 0"
            )
    top_p = body.get("top_p")
    if top_p is not None and (not _is_number(top_p) or not 0 <= top_p <= 1):
        raise Invalid("top_p: Input should be a valid number between 0 and 1")  # unverified
    top_k = body.get("top_k")
    if top_k is not None and (not _is_int(top_k) or top_k < 0):
        raise Invalid("top_k: Input should be greater than or equal to 0")  # unverified
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) for s in stops)):
        raise Invalid("stop_sequences: Input should be a valid list")


def _check_thinking_config(thinking: Any, max_tokens: int) -> bool:
    """True when extended thinking is on."""
    if thinking is None:
        return False
    if not isinstance(thinking, dict):
        raise Invalid("thinking: Input should be a valid dictionary or object to extract fields from")
    kind = thinking.get("type")
    if kind == "disabled":
        _no_extra(thinking, frozenset(("type",)), "thinking.disabled")
        return False
    if kind == "adaptive":
        _no_extra(thinking, frozenset(("type", "display")), "thinking.adaptive")
        _check_display(thinking, "thinking.adaptive")
        return True
    if kind != "enabled":
        raise Invalid(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the expected tags: "
            "'enabled', 'disabled', 'adaptive'"
        )
    _no_extra(thinking, frozenset(("type", "budget_tokens", "display")), "thinking.enabled")
    _check_display(thinking, "thinking.enabled")
    if "budget_tokens" not in thinking:
        raise Invalid("thinking.enabled.budget_tokens: Field required")
    budget = thinking["budget_tokens"]
    if not _is_int(budget):
        raise Invalid("thinking.enabled.budget_tokens: Input should be a valid integer")
    if budget < 1024:
        raise Invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if budget >= max_tokens:
        raise Invalid(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation "
            f"at {EXTENDED_THINKING_DOCS}#max-tokens-and-context-window-size"
        )
    return True


def _check_display(thinking: dict, path: str) -> None:
    if "display" in thinking and thinking["display"] not in THINKING_DISPLAYS:
        raise Invalid(f"{path}.display: Input should be 'summarized' or 'omitted'")


def _check_sampling_with_thinking(body: dict) -> None:
    compat = f"Please consult our documentation at {EXTENDED_THINKING_DOCS}#feature-compatibility"
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        raise Invalid(f"`temperature` may only be set to 1 when thinking is enabled. {compat}")
    if body.get("top_k") is not None:
        raise Invalid(f"`top_k` must be unset when thinking is enabled. {compat}")  # unverified
    top_p = body.get("top_p")
    if top_p is not None and top_p < 0.95:
        raise Invalid(f"`top_p` must be unset or >= 0.95 when thinking is enabled. {compat}")  # unverified


def _check_tools(tools: Any) -> set[str]:
    if tools is None:
        return set()
    if not isinstance(tools, list):
        raise Invalid("tools: Input should be a valid list")
    names: list[str] = []
    for k, tool in enumerate(tools):
        path = f"tools.{k}.custom"
        if not isinstance(tool, dict):
            raise Invalid(f"tools.{k}: Input should be a valid dictionary")
        kind = tool.get("type", "custom")
        if kind in SERVER_TOOLS:
            _no_extra(tool, SERVER_TOOL_KEYS, f"tools.{k}.{kind}")
            if tool.get("name") != SERVER_TOOLS[kind]:
                raise Invalid(f"tools.{k}.{kind}.name: Input should be '{SERVER_TOOLS[kind]}'")
            names.append(tool["name"])
            continue
        if kind != "custom":
            expected = ", ".join(f"'{t}'" for t in ("custom", *SERVER_TOOLS))
            raise Invalid(
                f"tools.{k}: Input tag '{kind}' found using 'type' does not match any "
                f"of the expected tags: {expected}"
            )
        _no_extra(tool, TOOL_KEYS, path)
        name = _require_str(tool, "name", path)
        if not TOOL_NAME_PATTERN.match(name):
            raise Invalid(f"{path}.name: String should match pattern '{TOOL_NAME_PATTERN.pattern}'")
        if "description" in tool and not isinstance(tool["description"], str):
            raise Invalid(f"{path}.description: Input should be a valid string")
        if "input_schema" not in tool:
            raise Invalid(f"{path}.input_schema: Field required")
        schema = tool["input_schema"]
        if not isinstance(schema, dict):
            raise Invalid(f"{path}.input_schema: Input should be a valid dictionary")
        if schema.get("type") != "object":
            raise Invalid(f"{path}.input_schema.type: Input should be 'object'")
        names.append(name)
    if len(set(names)) != len(names):
        raise Invalid("tools: Tool names must be unique.")
    return set(names)


def _check_tool_choice(choice: Any, tool_names: set[str], thinking: bool, has_tools: bool) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict):
        raise Invalid("tool_choice: Input should be a valid dictionary or object to extract fields from")
    kind = choice.get("type")
    if kind not in ("auto", "any", "tool", "none"):
        raise Invalid(
            f"tool_choice: Input tag '{kind}' found using 'type' does not match any of the "
            "expected tags: 'auto', 'any', 'tool', 'none'"
        )
    allowed = (
        ("type", "name", "disable_parallel_tool_use")
        if kind == "tool"
        else ("type", "disable_parallel_tool_use")
    )
    _no_extra(choice, frozenset(allowed), f"tool_choice.{kind}")
    if kind == "tool":
        name = _require_str(choice, "name", "tool_choice.tool")
        if name not in tool_names:
            raise Invalid(f"tool_choice.tool.name: Tool '{name}' not found in `tools`")  # unverified
    if kind in ("any", "tool") and not has_tools:
        raise Invalid("`tool_choice` may only be specified while providing tools.")  # unverified
    if thinking and kind in ("any", "tool"):
        raise Invalid("Thinking may not be enabled when tool_choice forces tool use.")


def _message_blocks(message: Any, i: int, final: bool) -> list[dict]:
    """The message's content as a checked block list (a string is one text block)."""
    path = f"messages.{i}"
    if not isinstance(message, dict):
        raise Invalid(f"{path}: Input should be a valid dictionary")
    _no_extra(message, frozenset(("role", "content")), path)
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
    _no_extra(block, BLOCK_KEYS[kind], f"{path}.{kind}")
    if kind == "text":
        _check_text(block, path)
    elif kind == "image":
        _check_image(block, path)
    elif kind == "document":
        _check_document(block, path)
    elif kind == "tool_use":
        tool_id = _require_str(block, "id", f"{path}.tool_use")
        if not ID_PATTERN.match(tool_id):
            raise Invalid(f"{path}.tool_use.id: String should match pattern '{ID_PATTERN.pattern}'")
        _require_str(block, "name", f"{path}.tool_use")
        if "input" not in block:
            raise Invalid(f"{path}.tool_use.input: Field required")
        if not isinstance(block["input"], dict):
            raise Invalid(f"{path}.tool_use.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        _check_tool_result(block, path)
    elif kind == "thinking":
        _require_str(block, "thinking", f"{path}.thinking")
        _require_str(block, "signature", f"{path}.thinking")
    elif kind == "redacted_thinking":
        _require_str(block, "data", f"{path}.redacted_thinking")
    elif kind == "server_tool_use":
        tool_id = _require_str(block, "id", f"{path}.server_tool_use")
        if not SERVER_ID.match(tool_id):
            raise Invalid(f"{path}.server_tool_use.id: String should match pattern '{SERVER_ID.pattern}'")
        if block.get("name") not in SERVER_RESULTS:
            names = ", ".join(f"'{n}'" for n in SERVER_RESULTS)
            raise Invalid(f"{path}.server_tool_use.name: Input should be {names}")
        if not isinstance(block.get("input"), dict):
            raise Invalid(f"{path}.server_tool_use.input: Input should be a valid dictionary")
    elif kind in SERVER_BLOCKS:
        tool_id = _require_str(block, "tool_use_id", f"{path}.{kind}")
        if not SERVER_ID.match(tool_id):
            raise Invalid(f"{path}.{kind}.tool_use_id: String should match pattern '{SERVER_ID.pattern}'")
        if "content" not in block:
            raise Invalid(f"{path}.{kind}.content: Field required")
    else:  # pragma: no cover - ALL_BLOCKS is exhaustive
        raise AssertionError(kind)


def _check_text(block: dict, path: str) -> None:
    text = _require_str(block, "text", f"{path}.text")
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
        _no_extra(source, frozenset(("type", "media_type", "data")), f"{path}.image.source.base64")
        if source.get("media_type") not in IMAGE_MEDIA_TYPES:
            raise Invalid(
                f"{path}.image.source.base64.media_type: Input should be 'image/jpeg', "
                "'image/png', 'image/gif' or 'image/webp'"
            )
        data = _require_str(source, "data", f"{path}.image.source.base64")
        size = len(data) * 3 // 4
        if size > MAX_IMAGE_BYTES:
            raise Invalid(
                f"{path}.image.source.base64: image exceeds 5 MB maximum: {size} bytes > "
                f"{MAX_IMAGE_BYTES} bytes"
            )
    elif kind == "url":
        _no_extra(source, frozenset(("type", "url")), f"{path}.image.source.url")
        _require_str(source, "url", f"{path}.image.source.url")
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
        _no_extra(source, frozenset(("type", "media_type", "data")), where)
        if source.get("media_type") != "application/pdf":
            raise Invalid(f"{where}.media_type: Input should be 'application/pdf'")
        _require_str(source, "data", where)
    elif kind == "text":
        _no_extra(source, frozenset(("type", "media_type", "data")), where)
        if source.get("media_type") != "text/plain":
            raise Invalid(f"{where}.media_type: Input should be 'text/plain'")
        _require_str(source, "data", where)
    elif kind == "url":
        _no_extra(source, frozenset(("type", "url")), where)
        _require_str(source, "url", where)
    else:
        raise Invalid(
            f"{path}.document.source: Input tag '{kind}' found using 'type' does not match any of "
            "the expected tags: 'base64', 'text', 'url', 'content'"
        )


def _check_tool_result(block: dict, path: str) -> None:
    tool_use_id = _require_str(block, "tool_use_id", f"{path}.tool_result")
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
        _no_extra(part, BLOCK_KEYS[part["type"]], f"{part_path}.{part['type']}")
        if part["type"] == "text":
            _check_text(part, part_path)
        elif part["type"] == "image":
            _check_image(part, part_path)
        else:
            _check_document(part, part_path)
