"""The OpenAI Responses API's request rules (stateless use: `store: false`), on the wire JSON.

Messages follow the API's own phrasing ("Invalid 'input[3].call_id': string too long. ...", "No
tool output found for function call X."); those marked "unverified" are the most plausible
wording where no recording exists.
"""

from __future__ import annotations

import re
from typing import Any

from gateway.simulators.base import Rejection, SimulatorState
from gateway.simulators.reasoning_rules import openai_effort_problem
from gateway.simulators.responses_shapes import (
    OUTPUT_OF,
    Invalid,
    bad_value,
    check_item,
    missing,
    no_unknown,
    type_error,
)
from gateway.simulators.structured import strict_schema_problem, unbounded_problem

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
# call ids issued together with a reasoning item share its key: rs_<key> / fc_<key>_<n> (ctc_ for
# custom tool calls)
BOUND_CALL_ID = re.compile(r"^(?:fc|ctc)_([0-9a-f]{40})_(\d+)$")

TOP_LEVEL_KEYS = frozenset(
    (
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "reasoning",
        "include",
        "store",
        "stream",
        "max_output_tokens",
        "temperature",
        "top_p",
        "parallel_tool_calls",
        "metadata",
        "text",
        "truncation",
        "user",
        "service_tier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
        "stream_options",
        "background",
        "max_tool_calls",
        "top_logprobs",
        "previous_response_id",
    )
)
INCLUDABLE = (
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
    "message.input_image.image_url",
    "file_search_call.results",
    "web_search_call.action.sources",
    "web_search_call.results",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
)
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# tools the API runs itself, with the keys each takes (the simulator accepts them and never runs them)
HOSTED_TOOL_KEYS = {
    "web_search": frozenset(
        (
            "type",
            "external_web_access",
            "search_content_types",
            "filters",
            "user_location",
            "search_context_size",
        )
    ),
    "web_search_preview": frozenset(("type", "search_context_size", "user_location")),
    "file_search": frozenset(("type", "vector_store_ids", "max_num_results", "filters", "ranking_options")),
    "code_interpreter": frozenset(("type", "container")),
    "tool_search": frozenset(("type", "execution", "description", "parameters")),
    "image_generation": frozenset(("type", "quality", "size", "output_format", "background", "model")),
}
TOOL_TYPES = ("function", "custom", *HOSTED_TOOL_KEYS)
OUTPUT_ITEMS = frozenset(OUTPUT_OF.values())
GRAMMAR_SYNTAXES = ("lark", "regex")
SUMMARIES = ("auto", "concise", "detailed")


def encrypted_content(state: SimulatorState, model: str, reasoning_id: str, summary: list[str]) -> str:
    return state.sign(model, reasoning_id, *summary)


def encrypted_content_ok(
    state: SimulatorState, model: str, reasoning_id: str, summary: list[str], token: Any
) -> bool:
    return state.verify(token, model, reasoning_id, *summary)


def validate(state: SimulatorState, body: Any, model: str) -> Rejection | None:
    return check(state, body, model)[0]


def check(state: SimulatorState, body: Any, model: str) -> tuple[Rejection | None, int]:
    """(rejection, number of reasoning items whose encrypted content verified). Pure."""
    try:
        return None, _check(state, body, model)
    except Invalid as exc:
        return exc.rejection, 0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(state: SimulatorState, body: Any, model: str) -> int:
    if not isinstance(body, dict):
        raise type_error("body", "an object", body)  # unverified
    no_unknown(body, TOP_LEVEL_KEYS, "")
    if "model" not in body:
        raise missing("model")
    if not isinstance(body["model"], str):
        raise type_error("model", "a string", body["model"])
    # The gateway is stateless: it must always send `store: false` (nothing may be persisted at
    # OpenAI, and replayed reasoning must travel as encrypted_content). The real API defaults to
    # store=true, so a forgotten flag would pass silently there; the simulator refuses it instead.
    if body.get("store") is not False:
        raise Invalid(
            "Simulator requires 'store': false (the gateway is stateless and must never ask the "
            "API to persist items).",
            "store",
            "invalid_value",
        )
    if body.get("previous_response_id") is not None:
        pid = body["previous_response_id"]
        raise Invalid(
            f"Previous response with id '{pid}' not found.",
            "previous_response_id",
            "previous_response_not_found",
            status=404,
        )
    _check_options(body)
    reasoning = _check_reasoning(body.get("reasoning"))
    effort = body["reasoning"].get("effort") if isinstance(body.get("reasoning"), dict) else None
    if effort is not None:
        problem = openai_effort_problem(model, effort, "reasoning.effort")
        if problem is not None:
            raise Invalid(problem[0], "reasoning.effort", problem[1])
    if reasoning and body.get("temperature") not in (None, 1):
        raise Invalid(
            "Unsupported parameter: 'temperature' is not supported with this model.",
            "temperature",
            "unsupported_parameter",
        )
    tool_names = _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"), tool_names)
    if "input" not in body:
        raise missing("input")  # stateless: there is no previous response to continue from
    items = body["input"]
    if isinstance(items, str):
        return 0
    if not isinstance(items, list):
        raise type_error("input", "one of a string or an array of input items", items)
    for n, item in enumerate(items):
        check_item(item, n)
    return _check_sequence(state, model, items)


def _check_text_format(text: Any) -> None:
    if text is None:
        return
    if not isinstance(text, dict):
        raise type_error("text", "an object", text)
    fmt = text.get("format")
    if fmt is None:
        return
    if not isinstance(fmt, dict):
        raise type_error("text.format", "an object", fmt)
    kind = fmt.get("type")
    if kind not in ("text", "json_object", "json_schema"):
        raise bad_value("text.format.type", kind, ("text", "json_object", "json_schema"))
    if kind != "json_schema":
        return
    for key in ("name", "schema"):
        if key not in fmt:
            raise Invalid(
                f"Missing required parameter: 'text.format.{key}'.",
                f"text.format.{key}",
                "missing_required_parameter",
            )
    unbounded = unbounded_problem(fmt["schema"]) if isinstance(fmt.get("schema"), dict) else None
    if unbounded:
        raise Invalid(unbounded, "text.format.schema", "invalid_json_schema")
    if fmt.get("strict") is True:
        problem = strict_schema_problem(fmt["schema"])
        if problem:
            raise Invalid(
                f"Invalid schema for response_format '{fmt['name']}': {problem}",
                "text.format.schema",
                "invalid_json_schema",
            )


def _check_options(body: dict) -> None:
    _check_text_format(body.get("text"))
    if body.get("instructions") is not None and not isinstance(body["instructions"], str):
        raise type_error("instructions", "a string", body["instructions"])
    for key in ("stream", "parallel_tool_calls", "background"):
        if body.get(key) is not None and not isinstance(body[key], bool):
            raise type_error(key, "a boolean", body[key])
    for key, top in (("temperature", 2), ("top_p", 1)):
        value = body.get(key)
        if value is None:
            continue
        if not _is_number(value):
            raise type_error(key, "a decimal", value)
        if value > top:
            raise Invalid(
                f"Invalid '{key}': decimal above maximum value. Expected a value <= {top}, but got "
                f"{value} instead.",
                key,
                "decimal_above_max_value",
            )
        if value < 0:
            raise Invalid(
                f"Invalid '{key}': decimal below minimum value. Expected a value >= 0, but got "
                f"{value} instead.",
                key,
                "decimal_below_min_value",
            )
    limit = body.get("max_output_tokens")
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise type_error("max_output_tokens", "an integer", limit)
        if limit < 16:
            raise Invalid(
                f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, "
                f"but got {limit} instead.",
                "max_output_tokens",
                "integer_below_min_value",
            )
    include = body.get("include")
    if include is not None:
        if not isinstance(include, list):
            raise type_error("include", "an array", include)
        for k, value in enumerate(include):
            if value not in INCLUDABLE:
                raise bad_value(f"include[{k}]", value, INCLUDABLE)


def _check_reasoning(reasoning: Any) -> bool:
    """True when the request asks the model to reason."""
    if reasoning is None:
        return False
    if not isinstance(reasoning, dict):
        raise type_error("reasoning", "an object", reasoning)
    no_unknown(reasoning, frozenset(("effort", "summary", "generate_summary")), "reasoning")
    effort = reasoning.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise bad_value("reasoning.effort", effort, EFFORTS)
    summary = reasoning.get("summary")
    if summary is not None and summary not in SUMMARIES:
        raise bad_value("reasoning.summary", summary, SUMMARIES)
    return effort != "none"


def _check_tools(tools: Any) -> dict[str, str]:
    """Name -> type ("function" | "custom") of the tools the model may call."""
    if tools is None:
        return {}
    if not isinstance(tools, list):
        raise type_error("tools", "an array", tools)
    names: dict[str, str] = {}
    for k, tool in enumerate(tools):
        path = f"tools[{k}]"
        if not isinstance(tool, dict):
            raise type_error(path, "an object", tool)
        if "type" not in tool:
            raise missing(f"{path}.type")
        kind = tool["type"]
        if kind not in TOOL_TYPES:
            raise bad_value(f"{path}.type", kind, TOOL_TYPES)
        if kind in HOSTED_TOOL_KEYS:
            no_unknown(tool, HOSTED_TOOL_KEYS[kind], path)
            continue
        if kind == "custom":
            no_unknown(tool, frozenset(("type", "name", "description", "format")), path)
            _check_custom_format(tool.get("format"), f"{path}.format")
        else:
            no_unknown(tool, frozenset(("type", "name", "description", "parameters", "strict")), path)
        if "name" not in tool:
            raise missing(f"{path}.name")
        name = tool["name"]
        if not isinstance(name, str):
            raise type_error(f"{path}.name", "a string", name)
        if len(name) > 64:
            raise Invalid(
                f"Invalid '{path}.name': string too long. Expected a string with maximum length 64, "
                f"but got a string with length {len(name)} instead.",
                f"{path}.name",
                "string_above_max_length",
            )
        if not TOOL_NAME_PATTERN.match(name):
            raise Invalid(
                f"Invalid '{path}.name': string does not match pattern. Expected a string that "
                f"matches the pattern '{TOOL_NAME_PATTERN.pattern}'.",
                f"{path}.name",
                "invalid_value",
            )
        if name in names:  # unverified wording
            raise Invalid(f"Duplicate tool name '{name}' in 'tools'.", f"{path}.name", "invalid_value")
        if kind == "function" and "parameters" not in tool:
            raise missing(f"{path}.parameters")
        if tool.get("parameters") is not None and not isinstance(tool["parameters"], dict):
            raise type_error(f"{path}.parameters", "an object", tool["parameters"])
        if tool.get("description") is not None and not isinstance(tool["description"], str):
            raise type_error(f"{path}.description", "a string", tool["description"])
        if tool.get("strict") is not None and not isinstance(tool["strict"], bool):
            raise type_error(f"{path}.strict", "a boolean", tool["strict"])
        names[name] = kind
    return names


def _check_custom_format(fmt: Any, path: str) -> None:
    if fmt is None:
        return
    if not isinstance(fmt, dict):
        raise type_error(path, "an object", fmt)
    kind = fmt.get("type")
    if kind == "text":
        no_unknown(fmt, frozenset(("type",)), path)
    elif kind == "grammar":
        no_unknown(fmt, frozenset(("type", "syntax", "definition")), path)
        if fmt.get("syntax") not in GRAMMAR_SYNTAXES:
            raise bad_value(f"{path}.syntax", fmt.get("syntax"), GRAMMAR_SYNTAXES)
        if not isinstance(fmt.get("definition"), str):
            raise type_error(f"{path}.definition", "a string", fmt.get("definition"))
    else:
        raise bad_value(f"{path}.type", kind, ("text", "grammar"))


def _check_tool_choice(choice: Any, tool_names: dict[str, str]) -> None:
    if choice is None or choice in ("none", "auto", "required"):
        return
    if isinstance(choice, str):
        raise bad_value("tool_choice", choice, ("none", "auto", "required"))
    if not isinstance(choice, dict):
        raise type_error("tool_choice", "a string or an object", choice)
    if choice.get("type") not in ("function", "custom"):
        raise bad_value("tool_choice.type", choice.get("type"), ("function", "custom"))
    no_unknown(choice, frozenset(("type", "name")), "tool_choice")
    if tool_names.get(choice.get("name")) != choice["type"]:
        # unverified wording
        raise Invalid(f"Tool choice '{choice['type']}' not found in 'tools' parameter.", "tool_choice", None)


def _follows_reasoning(item: dict | None) -> bool:
    """What a reasoning item was generated before: an assistant message or a function call."""
    if item is None:
        return False
    kind = item.get("type", "message")
    return kind in OUTPUT_OF or (kind == "message" and item.get("role") == "assistant")


def _check_sequence(state: SimulatorState, model: str, items: list[dict]) -> int:
    seen_ids: set[str] = set()
    calls: dict[str, str] = {}  # call_id -> its output item type, in insertion order
    answered: set[str] = set()
    reasoning_ids: set[str] = set()
    verified = 0
    for n, item in enumerate(items):
        kind = item.get("type", "message")
        item_id = item.get("id")
        if isinstance(item_id, str):
            if item_id in seen_ids:
                raise Invalid(
                    f"Duplicate item found with id {item_id}. Remove duplicate items from your input "
                    "and try again."
                )
            seen_ids.add(item_id)
        if kind == "reasoning":
            _check_reasoning_item(state, model, item)
            if not _follows_reasoning(items[n + 1] if n + 1 < len(items) else None):
                raise Invalid(
                    f"Item '{item_id}' of type 'reasoning' was provided without its required following item."
                )
            reasoning_ids.add(item_id)
            verified += 1
        elif kind in OUTPUT_OF:
            bound = BOUND_CALL_ID.match(item_id) if isinstance(item_id, str) else None
            if bound is not None and f"rs_{bound.group(1)}" not in reasoning_ids:
                raise Invalid(
                    f"Item '{item_id}' of type '{kind}' was provided without its required "
                    f"'reasoning' item: 'rs_{bound.group(1)}'."
                )
            calls[item["call_id"]] = OUTPUT_OF[kind]
        elif kind in OUTPUT_ITEMS:
            if calls.get(item["call_id"]) != kind:
                what = kind.removesuffix("_output").replace("_", " ")
                # the function call wording is recorded; the custom tool call one is unverified
                raise Invalid(f"No tool call found for {what} output with call_id {item['call_id']}.")
            answered.add(item["call_id"])
    for call_id, output in calls.items():
        if call_id not in answered:
            what = "function call" if output == "function_call_output" else "custom tool call"
            raise Invalid(f"No tool output found for {what} {call_id}.")
    return verified


def _check_reasoning_item(state: SimulatorState, model: str, item: dict) -> None:
    item_id = item["id"]
    token = item.get("encrypted_content")
    if token is None:
        raise Invalid(
            f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to "
            "false. Try again with `store` set to true, or remove this item from your input.",
            status=404,
        )
    summary = [part["text"] for part in item["summary"]]
    if not encrypted_content_ok(state, model, item_id, summary, token):
        # unverified wording
        raise Invalid(
            f"The encrypted content for item {item_id} could not be verified.",
            "input",
            "invalid_encrypted_content",
        )
