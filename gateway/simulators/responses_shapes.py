"""Shape of OpenAI Responses input items (messages, reasoning, function calls and outputs) and
the API's error phrasing ("Invalid type for 'input[2].arguments': ...", "Missing required
parameter: ..."). Wording marked "unverified" is the most plausible where no recording exists.
"""

from __future__ import annotations

from typing import Any

from gateway.simulators.base import Rejection

MAX_CALL_ID = 64
ROLES = ("user", "system", "developer", "assistant")
INPUT_PARTS = ("input_text", "input_image", "input_file")
OUTPUT_PARTS = ("output_text", "refusal")
ITEM_TYPES = (
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    # hosted tools' items, replayed as the API returned them
    # (https://platform.openai.com/docs/guides/tools-web-search, .../tools-file-search)
    "web_search_call",
    "file_search_call",
)
ITEM_KEYS = {
    "message": frozenset(("type", "role", "content", "id", "status")),
    "reasoning": frozenset(("type", "id", "summary", "encrypted_content", "status", "content")),
    "function_call": frozenset(("type", "id", "call_id", "name", "arguments", "status")),
    "function_call_output": frozenset(("type", "id", "call_id", "output", "status")),
    "custom_tool_call": frozenset(("type", "id", "call_id", "name", "input", "status")),
    "custom_tool_call_output": frozenset(("type", "id", "call_id", "output", "status")),
    "web_search_call": frozenset(("type", "id", "status", "action")),
    "file_search_call": frozenset(("type", "id", "status", "queries", "results")),
}
ID_PREFIXES = {
    "message": "msg",
    "reasoning": "rs",
    "function_call": "fc",
    "custom_tool_call": "ctc",
    "web_search_call": "ws",
    "file_search_call": "fs",
}
ANNOTATIONS = ("url_citation", "file_citation", "container_file_citation", "file_path")
# each call item type and the output item type that answers it
OUTPUT_OF = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}


class Invalid(Exception):
    def __init__(
        self,
        message: str,
        param: str | None = "input",
        code: str | None = None,
        status: int = 400,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.rejection = Rejection(status=status, message=message, type=type, param=param, code=code)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def type_error(param: str, expected: str, value: Any) -> Invalid:
    return Invalid(
        f"Invalid type for '{param}': expected {expected}, but got {_json_type(value)} instead.",
        param,
        "invalid_type",
    )


def missing(param: str) -> Invalid:
    return Invalid(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def bad_value(param: str, value: Any, supported: tuple[str, ...]) -> Invalid:
    quoted = [f"'{s}'" for s in supported]
    if len(quoted) <= 2:
        listed = " and ".join(quoted)
    else:
        listed = ", ".join(quoted[:-1]) + f", and {quoted[-1]}"
    return Invalid(f"Invalid value: '{value}'. Supported values are: {listed}.", param, "invalid_value")


def no_unknown(obj: dict, allowed: frozenset[str], prefix: str) -> None:
    for key in obj:
        if key not in allowed:
            param = f"{prefix}.{key}" if prefix else key
            raise Invalid(f"Unknown parameter: '{param}'.", param, "unknown_parameter")


def _item_type(item: dict, param: str) -> str:
    kind = item.get("type")
    if kind is None:
        if "role" not in item:
            raise missing(f"{param}.type")
        return "message"  # an "easy" message: {role, content}
    if kind not in ITEM_TYPES:
        raise bad_value(f"{param}.type", kind, ITEM_TYPES)  # the API lists more (hosted tool items)
    return kind


def _required_str(item: dict, key: str, param: str) -> str:
    if key not in item:
        raise missing(f"{param}.{key}")
    if not isinstance(item[key], str):
        raise type_error(f"{param}.{key}", "a string", item[key])
    return item[key]


def check_item(item: Any, n: int) -> None:
    param = f"input[{n}]"
    if not isinstance(item, dict):
        raise type_error(param, "an object", item)
    kind = _item_type(item, param)
    no_unknown(item, ITEM_KEYS[kind], param)
    if "id" in item:
        item_id = _required_str(item, "id", param)
        prefix = ID_PREFIXES.get(kind)
        if prefix is not None and not item_id.startswith(prefix):
            raise Invalid(
                f"Invalid '{param}.id': '{item_id}'. Expected an ID that begins with '{prefix}'.",
                f"{param}.id",
                "invalid_value",
            )
    if kind == "message":
        _check_message(item, param)
    elif kind == "reasoning":
        _required_str(item, "id", param)
        if "summary" not in item:
            raise missing(f"{param}.summary")
        if not isinstance(item["summary"], list):
            raise type_error(f"{param}.summary", "an array", item["summary"])
        for k, part in enumerate(item["summary"]):
            if not isinstance(part, dict) or part.get("type") != "summary_text":
                raise bad_value(
                    f"{param}.summary[{k}].type",
                    part.get("type") if isinstance(part, dict) else part,
                    ("summary_text",),
                )
            _required_str(part, "text", f"{param}.summary[{k}]")
        if item.get("encrypted_content") is not None and not isinstance(item["encrypted_content"], str):
            raise type_error(f"{param}.encrypted_content", "a string", item["encrypted_content"])
    elif kind == "function_call":
        _check_call_id(item, param)
        _required_str(item, "name", param)
        _required_str(item, "arguments", param)
    elif kind == "custom_tool_call":
        _check_call_id(item, param)
        _required_str(item, "name", param)
        _required_str(item, "input", param)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        _check_call_id(item, param)
        if "output" not in item:
            raise missing(f"{param}.output")
        output = item["output"]
        if isinstance(output, list):
            for m, part in enumerate(output):
                _check_part(part, f"{param}.output[{m}]", INPUT_PARTS)
        elif not isinstance(output, str):
            raise type_error(f"{param}.output", "one of a string or an array", output)
    elif kind in ("web_search_call", "file_search_call"):
        _required_str(item, "id", param)
        _required_str(item, "status", param)
        if kind == "web_search_call" and not isinstance(item.get("action"), dict):
            raise missing(f"{param}.action")
        if kind == "file_search_call" and not isinstance(item.get("queries"), list):
            raise missing(f"{param}.queries")
    else:  # pragma: no cover - ITEM_TYPES is exhaustive
        raise AssertionError(kind)


def _check_call_id(item: dict, param: str) -> None:
    call_id = _required_str(item, "call_id", param)
    if len(call_id) > MAX_CALL_ID:
        raise Invalid(
            f"Invalid '{param}.call_id': string too long. Expected a string with maximum length "
            f"{MAX_CALL_ID}, but got a string with length {len(call_id)} instead.",
            f"{param}.call_id",
            "string_above_max_length",
        )


def _check_message(item: dict, param: str) -> None:
    role = item.get("role")
    if role is None:
        raise missing(f"{param}.role")
    if role not in ROLES:
        raise bad_value(f"{param}.role", role, ("assistant", "system", "developer", "user"))
    if "content" not in item:
        raise missing(f"{param}.content")
    content = item["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise type_error(f"{param}.content", "one of a string or an array", content)
    allowed = OUTPUT_PARTS if role == "assistant" else INPUT_PARTS
    for m, part in enumerate(content):
        _check_part(part, f"{param}.content[{m}]", allowed)


def _check_part(part: Any, param: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(part, dict):
        raise type_error(param, "an object", part)
    kind = part.get("type")
    if kind not in allowed:
        raise bad_value(param, kind, allowed)
    if kind in ("input_text", "output_text"):
        _required_str(part, "text", param)
        keys = ("type", "text", "annotations", "logprobs") if kind == "output_text" else ("type", "text")
        no_unknown(part, frozenset(keys), param)
        for k, note in enumerate(part.get("annotations") or ()):
            if not isinstance(note, dict) or note.get("type") not in ANNOTATIONS:
                kind_of = note.get("type") if isinstance(note, dict) else note
                raise bad_value(f"{param}.annotations[{k}].type", kind_of, ANNOTATIONS)
    elif kind == "refusal":
        _required_str(part, "refusal", param)
    elif kind == "input_image":
        if part.get("image_url") is None and part.get("file_id") is None:
            raise missing(f"{param}.image_url")
        if part.get("detail", "auto") not in ("low", "high", "auto"):
            raise bad_value(f"{param}.detail", part["detail"], ("low", "high", "auto"))
        no_unknown(part, frozenset(("type", "image_url", "file_id", "detail")), param)
    elif kind == "input_file":
        no_unknown(part, frozenset(("type", "file_id", "file_data", "file_url", "filename")), param)
    else:  # pragma: no cover - allowed tuples are exhaustive
        raise AssertionError(kind)
