"""The Gemini API's request rules (generateContent): fields and parts, tool declarations, the
JSON response format, thinking settings, function call / response turn order, and the thought
signatures of the current turn, verified as the real API does. Bodies are parsed first
(`gemini_schema`); the simulator (`gemini`) serves what passes.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

from gateway.simulators import structured
from gateway.simulators.base import Rejection, SimulatorState
from gateway.simulators.gemini_render import call_covers, signs, text_covers, thinking_config
from gateway.simulators.gemini_schema import PART_DATA, decode_bytes, parse
from gateway.simulators.reasoning_rules import gemini_budget_range, gemini_levels

INVALID = "INVALID_ARGUMENT"
# Documented dummy signatures for histories that did not come from this model.
PLACEHOLDERS = frozenset({"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"})
PLACEHOLDER_BYTES = frozenset(p.encode() for p in PLACEHOLDERS)
FUNCTION_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance. Additional "
    "data, function "
    "call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
BAD_SIGNATURE = "Corrupted thought signature."  # unverified wording for a forged/foreign signature


def invalid(message: str) -> Rejection:
    return Rejection(400, message, INVALID)


def _field_error(path: str, message: str) -> Rejection:
    return invalid(f"* GenerateContentRequest.{path}: {message}\n")


@dataclass
class Findings:
    verified: int = 0
    placeholders: int = 0


@dataclass
class Turn:
    """One content, with its function parts picked out."""

    index: int
    role: str
    parts: list[dict]
    calls: list[dict] = field(default_factory=list)
    responses: list[dict] = field(default_factory=list)


def _turns(contents: list[dict]) -> list[Turn]:
    turns = []
    for i, content in enumerate(contents):
        parts = content.get("parts", [])
        turn = Turn(i, content.get("role") or "user", parts)
        turn.calls = [p for p in parts if "functionCall" in p]
        turn.responses = [p for p in parts if "functionResponse" in p]
        turns.append(turn)
    return turns


def offered_tools(req: dict) -> list[tuple[str, dict]]:
    """The functions a (valid) request declares, as (name, schema of the arguments)."""
    return [
        (d["name"], d.get("parameters") or d.get("parametersJsonSchema") or {})
        for tool in req.get("tools") or ()
        for d in tool.get("functionDeclarations") or ()
        if "name" in d
    ]


def forced_tool(req: dict) -> tuple[str, Any] | None:
    """The function mode ANY makes the model call: the one allowed name, else the last declared
    of those allowed."""
    config = (req.get("toolConfig") or {}).get("functionCallingConfig") or {}
    if config.get("mode") != "ANY":
        return None
    allowed = config.get("allowedFunctionNames")
    declared = [
        (
            d["name"],
            d["parametersJsonSchema"] if "parametersJsonSchema" in d else _json_schema(d.get("parameters")),
        )
        for tool in req.get("tools") or ()
        for d in tool.get("functionDeclarations") or ()
        if "name" in d and (not allowed or d["name"] in allowed)
    ]
    return structured.pick_forced(declared, None)


def _json_schema(schema: Any) -> Any:
    """`parameters` is Google's OpenAPI subset (upper-case types, `nullable`): the same schema
    in JSON Schema terms, to validate an answer against."""
    if isinstance(schema, list):
        return [_json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema if schema is not None else {"type": "object"}
    out = {key: _json_schema(value) for key, value in schema.items() if key != "nullable"}
    kind = schema.get("type")
    if isinstance(kind, str):
        out["type"] = [kind.lower(), "null"] if schema.get("nullable") else kind.lower()
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {name: _json_schema(sub) for name, sub in schema["properties"].items()}
    return out


def after_tool_result(req: dict) -> bool:
    contents = req.get("contents") or []
    return bool(contents) and any("functionResponse" in p for p in contents[-1].get("parts") or ())


# image input: PNG, JPEG, WEBP, HEIC, HEIF (https://ai.google.dev/gemini-api/docs/image-understanding,
# "Supported image formats")
IMAGE_TYPES = frozenset(("image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"))


def _check_fields(req: dict, model: str) -> Rejection | None:
    contents = req.get("contents")
    if not contents:
        return _field_error("contents", "contents is not specified")
    for i, content in enumerate(contents):
        if content.get("role") not in (None, "", "user", "model"):
            return invalid("Please use a valid role: user, model.")
        if not content.get("parts"):
            return _field_error(f"contents[{i}].parts", "contents.parts must not be empty.")
        for j, part in enumerate(content["parts"]):
            path = f"contents[{i}].parts[{j}]"
            if PART_DATA.isdisjoint(part):
                return _field_error(
                    f"{path}.data", "required oneof field 'data' must have one initialized field"
                )
            blob = part.get("inlineData")
            mime = blob.get("mimeType") if isinstance(blob, dict) else None
            if isinstance(mime, str) and mime.startswith("image/") and mime not in IMAGE_TYPES:
                return invalid(f"Unsupported MIME type: {mime}")  # unverified wording
            for key, proto in (("functionCall", "function_call"), ("functionResponse", "function_response")):
                if key in part and not part[key].get("name"):
                    return _field_error(f"{path}.{proto}.name", "Name cannot be empty.")  # unverified wording
    for t, tool in enumerate(req.get("tools", [])):
        for d, declaration in enumerate(tool.get("functionDeclarations", [])):
            path = f"tools[{t}].function_declarations[{d}]"
            if not FUNCTION_NAME.match(declaration.get("name", "")):
                # unverified wording
                return _field_error(
                    f"{path}.name",
                    "Invalid function name. Must start with a letter or an underscore. Must be "
                    "alphameric (a-z, "
                    "A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a "
                    "maximum length of 64.",
                )
            if "parameters" in declaration and (
                rejection := _check_schema(declaration["parameters"], f"{path}.parameters")
            ):
                return rejection
    return _check_response_format(req, model) or _check_thinking(req, model)


# models that take a JSON response format together with function calling
JSON_WITH_TOOLS_MODELS = ("gemini-3",)


def response_json_schema(req: dict) -> Any:
    """The schema a JSON answer must follow (None: the request asks for no JSON)."""
    config = req.get("generationConfig") or {}
    if config.get("responseMimeType") != "application/json":
        return None
    return config.get("responseJsonSchema") or config.get("responseSchema") or {"type": "object"}


def _check_response_format(req: dict, model: str) -> Rejection | None:
    config = req.get("generationConfig") or {}
    json_out = config.get("responseMimeType") == "application/json"
    if ("responseJsonSchema" in config or "responseSchema" in config) and not json_out:
        # unverified wording
        return invalid("response_mime_type must be application/json when a response schema is set.")
    if "responseJsonSchema" in config and "responseSchema" in config:
        return invalid("responseSchema and responseJsonSchema cannot both be set.")  # unverified wording
    schema = config.get("responseJsonSchema")
    if isinstance(schema, dict) and (problem := structured.unbounded_problem(schema)):
        return invalid(problem)
    has_functions = any(tool.get("functionDeclarations") for tool in req.get("tools", []))
    if json_out and has_functions and not any(m in model for m in JSON_WITH_TOOLS_MODELS):
        return invalid("Function calling with a response mime type: 'application/json' is unsupported")
    return None


def _check_schema(schema: dict, path: str) -> Rejection | None:
    properties = schema.get("properties", {})
    for r, name in enumerate(schema.get("required", [])):
        if name not in properties:
            return _field_error(f"{path}.required[{r}]", "property is not defined")
    for p, sub in enumerate(properties.values()):
        if rejection := _check_schema(sub, f"{path}.properties[{p}].value"):
            return rejection
    if "items" in schema:
        return _check_schema(schema["items"], f"{path}.items")
    return None


def _check_thinking(req: dict, model: str) -> Rejection | None:
    config = thinking_config(req)
    if "thinkingBudget" in config and "thinkingLevel" in config:
        return invalid(
            "You can only set only one of thinking budget and thinking level."
        )  # unverified wording
    if "thinkingLevel" in config and not signs(model):
        return invalid("Thinking level is not supported for this model.")  # unverified wording
    if int(config.get("thinkingBudget", -1)) == 0 and "gemini-2.5-pro" in model:
        return invalid("Budget 0 is invalid. This model only works in thinking mode.")
    level = config.get("thinkingLevel")
    if level is not None and str(level).lower() not in gemini_levels(model):
        return invalid(f"Thinking level {level} is not supported for this model.")  # unverified wording
    budget = config.get("thinkingBudget")
    span = gemini_budget_range(model)
    if budget is not None and span is not None and budget != -1 and not span[0] <= int(budget) <= span[1]:
        return invalid(  # unverified wording
            f"The thinking budget {budget} is invalid. Please choose a value between {span[0]} and {span[1]}."
        )
    return None


def _check_turn_order(turns: list[Turn]) -> Rejection | None:
    for k, turn in enumerate(turns):
        previous = turns[k - 1] if k else None
        following = turns[k + 1] if k + 1 < len(turns) else None
        if turn.calls and (previous is None or previous.role != "user"):
            return invalid(
                "Please ensure that function call turn comes immediately after a user turn or after "
                "a function response turn."
            )
        if turn.responses:
            if previous is None or not previous.calls:
                return invalid(
                    "Please ensure that function response turn comes immediately after a function call turn"
                )
            if len(turn.responses) != len(previous.calls):
                return invalid(COUNT_MISMATCH)
        # unverified: a call turn answered by a turn without any function response counts as a mismatch
        if turn.calls and following is not None and not following.responses:
            return invalid(COUNT_MISMATCH)
    return None


COUNT_MISMATCH = (
    "Please ensure that the number of function response parts is equal to the number of function "
    "call parts of "
    "the function call turn."
)


def _signature_ok(state: SimulatorState, model: str, turn: Turn, part: dict, findings: Findings) -> bool:
    signature = part["thoughtSignature"]
    raw = decode_bytes(signature)
    if signature in PLACEHOLDERS or raw in PLACEHOLDER_BYTES:
        findings.placeholders += 1
        return True
    # the API takes URL-safe base64 back for the standard base64 it issued
    token = base64.b64encode(raw).decode() if raw is not None else signature
    if "functionCall" in part:
        call = part["functionCall"]
        ok = state.verify(token, *call_covers(model, call["name"], call.get("args")))
    elif "text" in part and not part.get("thought"):
        text = "".join(p["text"] for p in turn.parts if "text" in p and not p.get("thought"))
        ok = state.verify(token, *text_covers(model, text))
    else:
        ok = False  # this simulator signs nothing else
    findings.verified += ok
    return ok


def _check_signatures(
    state: SimulatorState, model: str, turns: list[Turn], findings: Findings
) -> Rejection | None:
    """Signatures are validated in the current turn only: after the last user content that is more
    than function responses."""
    start = 0
    for turn in turns:
        if turn.role == "user" and any("functionResponse" not in p for p in turn.parts):
            start = turn.index + 1
    for turn in turns[start:]:
        if turn.role != "model":
            continue
        for part in turn.parts:
            if "thoughtSignature" in part and not _signature_ok(state, model, turn, part, findings):
                return invalid(BAD_SIGNATURE)
        if signs(model) and turn.calls and "thoughtSignature" not in turn.calls[0]:
            # position: 1-based index of the content in `contents` (unverified)
            name = turn.calls[0]["functionCall"]["name"]
            return invalid(MISSING_SIGNATURE.format(name=name, position=turn.index + 1))
    return None


def check(state: SimulatorState, body: Any, model: str) -> tuple[Rejection | None, Findings, dict]:
    findings = Findings()
    req, errors = parse(body)
    if errors:
        return invalid("\n".join(errors)), findings, req
    rejection = _check_fields(req, model)
    if rejection is not None:
        return rejection, findings, req
    turns = _turns(req["contents"])
    rejection = _check_turn_order(turns) or _check_signatures(state, model, turns, findings)
    return rejection, findings, req


def validate(state: SimulatorState, body: dict, model: str) -> Rejection | None:
    return check(state, body, model)[0]
