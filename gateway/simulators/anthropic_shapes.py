"""Shape of an Anthropic Messages request: fields, types and blocks (each message's content
blocks in `anthropic_blocks`), with the API's pydantic-style error paths
(`messages.5.content.0.tool_use.id: ...`). Messages marked "unverified" were not confirmed against
the live API and are the most plausible wording.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.simulators.anthropic_blocks import BLOCK_KEYS, Invalid, message_blocks, no_extra, require_str

# unverified: the documented limit for custom tool names (64 in some docs, 128 in others)
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
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
TOOL_KEYS = frozenset(("type", "name", "description", "input_schema", "cache_control", "strict"))
EXTENDED_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def check_shape(body: Any) -> tuple[bool, list[dict], list[list[dict]]]:
    """(thinking enabled, messages, each message's content as a checked block list)."""
    if not isinstance(body, dict):
        raise Invalid("Input should be a valid dictionary")  # unverified
    no_extra(body, TOP_LEVEL_KEYS, "")
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
    return thinking, messages, [message_blocks(m, i, i == len(messages) - 1) for i, m in enumerate(messages)]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise Invalid("system: Input should be a valid list")
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise Invalid(f"system.{j}.type: Input should be 'text'")
        no_extra(block, BLOCK_KEYS["text"], f"system.{j}")
        require_str(block, "text", f"system.{j}")


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
        no_extra(thinking, frozenset(("type",)), "thinking.disabled")
        return False
    if kind == "adaptive":
        no_extra(thinking, frozenset(("type", "display")), "thinking.adaptive")
        _check_display(thinking, "thinking.adaptive")
        return True
    if kind != "enabled":
        raise Invalid(
            f"thinking: Input tag '{kind}' found using 'type' does not match any of the expected tags: "
            "'enabled', 'disabled', 'adaptive'"
        )
    no_extra(thinking, frozenset(("type", "budget_tokens", "display")), "thinking.enabled")
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
            no_extra(tool, SERVER_TOOL_KEYS, f"tools.{k}.{kind}")
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
        no_extra(tool, TOOL_KEYS, path)
        name = require_str(tool, "name", path)
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
    no_extra(choice, frozenset(allowed), f"tool_choice.{kind}")
    if kind == "tool":
        name = require_str(choice, "name", "tool_choice.tool")
        if name not in tool_names:
            raise Invalid(f"tool_choice.tool.name: Tool '{name}' not found in `tools`")  # unverified
    if kind in ("any", "tool") and not has_tools:
        raise Invalid("`tool_choice` may only be specified while providing tools.")  # unverified
    if thinking and kind in ("any", "tool"):
        raise Invalid("Thinking may not be enabled when tool_choice forces tool use.")
