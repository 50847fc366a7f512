"""Strict simulator of the Gemini API (v1beta generateContent / streamGenerateContent).

Gemini 3 thought signatures are issued with the state's key, bound to the model and the content
they cover (a function call's name and arguments; a text answer's text), and verified when they
come back in the current turn, as the real API does.
"""

from __future__ import annotations

import asyncio
import base64
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web

from gateway.simulators import structured
from gateway.simulators.base import (
    Fault,
    RecordedRequest,
    Rejection,
    Reply,
    SimulatorState,
    json_response,
    reset_connection,
    stream_sse,
)
from gateway.simulators.gemini_render import ReplyRenderer, call_covers, signs, text_covers, thinking_config
from gateway.simulators.gemini_schema import PART_DATA, decode_bytes, parse
from gateway.simulators.reasoning_rules import gemini_budget_range, gemini_levels

INVALID = "INVALID_ARGUMENT"
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
FAULT_MESSAGES = {
    400: "Request contains an invalid argument.",
    401: "API key not valid. Please pass a valid API key.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: "You exceeded your current quota, please check your plan and billing details. For more "
    "information on "
    "this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
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


def _invalid(message: str) -> Rejection:
    return Rejection(400, message, INVALID)


def _field_error(path: str, message: str) -> Rejection:
    return _invalid(f"* GenerateContentRequest.{path}: {message}\n")


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
            return _invalid("Please use a valid role: user, model.")
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
                return _invalid(f"Unsupported MIME type: {mime}")  # unverified wording
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
        return _invalid("response_mime_type must be application/json when a response schema is set.")
    if "responseJsonSchema" in config and "responseSchema" in config:
        return _invalid("responseSchema and responseJsonSchema cannot both be set.")  # unverified wording
    schema = config.get("responseJsonSchema")
    if isinstance(schema, dict) and (problem := structured.unbounded_problem(schema)):
        return _invalid(problem)
    has_functions = any(tool.get("functionDeclarations") for tool in req.get("tools", []))
    if json_out and has_functions and not any(m in model for m in JSON_WITH_TOOLS_MODELS):
        return _invalid("Function calling with a response mime type: 'application/json' is unsupported")
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
        return _invalid(
            "You can only set only one of thinking budget and thinking level."
        )  # unverified wording
    if "thinkingLevel" in config and not signs(model):
        return _invalid("Thinking level is not supported for this model.")  # unverified wording
    if int(config.get("thinkingBudget", -1)) == 0 and "gemini-2.5-pro" in model:
        return _invalid("Budget 0 is invalid. This model only works in thinking mode.")
    level = config.get("thinkingLevel")
    if level is not None and str(level).lower() not in gemini_levels(model):
        return _invalid(f"Thinking level {level} is not supported for this model.")  # unverified wording
    budget = config.get("thinkingBudget")
    span = gemini_budget_range(model)
    if budget is not None and span is not None and budget != -1 and not span[0] <= int(budget) <= span[1]:
        return _invalid(  # unverified wording
            f"The thinking budget {budget} is invalid. Please choose a value between {span[0]} and {span[1]}."
        )
    return None


def _check_turn_order(turns: list[Turn]) -> Rejection | None:
    for k, turn in enumerate(turns):
        previous = turns[k - 1] if k else None
        following = turns[k + 1] if k + 1 < len(turns) else None
        if turn.calls and (previous is None or previous.role != "user"):
            return _invalid(
                "Please ensure that function call turn comes immediately after a user turn or after "
                "a function response turn."
            )
        if turn.responses:
            if previous is None or not previous.calls:
                return _invalid(
                    "Please ensure that function response turn comes immediately after a function call turn"
                )
            if len(turn.responses) != len(previous.calls):
                return _invalid(COUNT_MISMATCH)
        # unverified: a call turn answered by a turn without any function response counts as a mismatch
        if turn.calls and following is not None and not following.responses:
            return _invalid(COUNT_MISMATCH)
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
                return _invalid(BAD_SIGNATURE)
        if signs(model) and turn.calls and "thoughtSignature" not in turn.calls[0]:
            # position: 1-based index of the content in `contents` (unverified)
            name = turn.calls[0]["functionCall"]["name"]
            return _invalid(MISSING_SIGNATURE.format(name=name, position=turn.index + 1))
    return None


def check(state: SimulatorState, body: Any, model: str) -> tuple[Rejection | None, Findings, dict]:
    findings = Findings()
    req, errors = parse(body)
    if errors:
        return _invalid("\n".join(errors)), findings, req
    rejection = _check_fields(req, model)
    if rejection is not None:
        return rejection, findings, req
    turns = _turns(req["contents"])
    rejection = _check_turn_order(turns) or _check_signatures(state, model, turns, findings)
    return rejection, findings, req


def validate(state: SimulatorState, body: dict, model: str) -> Rejection | None:
    return check(state, body, model)[0]


# -- serving ----------------------------------------------------------------------------------
def error_body(rejection: Rejection, details: list[dict] | None = None) -> dict:
    error: dict[str, Any] = {"code": rejection.status, "message": rejection.message, "status": rejection.type}
    if details:
        error["details"] = details
    return {"error": error}


def fault_rejection(status: int, fault: Fault) -> Rejection:
    return Rejection(
        status,
        fault.message or FAULT_MESSAGES.get(status, FAULT_MESSAGES[500]),
        fault.error_type or STATUS_NAMES.get(status, "INTERNAL"),
    )


def _retry_details(fault: Fault) -> list[dict] | None:
    if fault.retry_after is None:
        return None
    return [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{fault.retry_after:g}s"}]


def _sse(payload: dict) -> bytes:
    # Google frames its SSE events with CRLF
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"


def _fault_frame(fault: Fault) -> bytes:
    return _sse(error_body(fault_rejection(fault.status or 500, fault)))


def _array_frames(chunks: list[dict]) -> list[bytes]:
    """streamGenerateContent without alt=sse: one JSON array, written element by element."""
    frames = [(b"[" if n == 0 else b",\r\n") + orjson.dumps(chunk) for n, chunk in enumerate(chunks)]
    frames.append(b"]")
    return frames


def _array_fault_frame(fault: Fault) -> bytes:
    return b",\r\n" + orjson.dumps(error_body(fault_rejection(fault.status or 500, fault))) + b"]"


AUTH_MISSING = Rejection(
    401,
    "Request is missing required authentication credential. Expected OAuth 2 access token, login "
    "cookie or other "
    "valid authentication credential.",
    "UNAUTHENTICATED",
)
# The real API answers a wrong key with 400 API_KEY_INVALID; the simulators' contract is a 401.
AUTH_INVALID = Rejection(401, "API key not valid. Please pass a valid API key.", "UNAUTHENTICATED")
INVALID_KEY_DETAILS = [
    {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
    }
]


COUNT_KEYS = frozenset(("contents", "generateContentRequest"))


async def _count_tokens(
    request: web.Request, state: SimulatorState, model: str, headers: dict[str, str]
) -> web.Response:
    """`:countTokens` with `contents`, or a whole `generateContentRequest` (checked by the same
    rules as generateContent); the count is what generateContent reports as promptTokenCount."""
    raw = await request.read()
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    rejection = None
    inner: Any = None
    if not isinstance(body, dict) or len(body) != 1 or next(iter(body)) not in COUNT_KEYS:
        rejection = _invalid("Exactly one of contents or generateContentRequest must be set.")  # unverified
    elif "contents" in body:
        inner = {"contents": body["contents"]}
    else:
        given = body["generateContentRequest"]
        inner = dict(given) if isinstance(given, dict) else {}
        if inner.pop("model", None) != f"models/{model}":
            rejection = _invalid("generateContentRequest.model must name the model of the URL.")  # unverified
    if rejection is None:
        rejection = check(state, inner, model)[0]
    state.requests.append(RecordedRequest(request.path, headers, body, rejection))
    if rejection is not None:
        return json_response(error_body(rejection), rejection.status)
    return json_response({"totalTokens": max(1, len(orjson.dumps(inner)) // 4)})


EMBED_KEYS = frozenset(("model", "content", "taskType", "title", "outputDimensionality"))
TASK_TYPES = frozenset(
    (
        "TASK_TYPE_UNSPECIFIED",
        "RETRIEVAL_QUERY",
        "RETRIEVAL_DOCUMENT",
        "SEMANTIC_SIMILARITY",
        "CLASSIFICATION",
        "CLUSTERING",
        "QUESTION_ANSWERING",
        "FACT_VERIFICATION",
        "CODE_RETRIEVAL_QUERY",
    )
)


def _embed_rejection(item: Any, model: str, batch: bool) -> Rejection | None:
    """One EmbedContentRequest: known fields only, text parts, the URL's model (required in a
    batch), a known task type, a positive dimensionality."""
    if not isinstance(item, dict):
        return _invalid("Invalid JSON payload received. Expected an object.")
    for key in item:
        if key not in EMBED_KEYS:
            return _invalid(f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.')
    given = item.get("model")
    if (batch or given is not None) and given != f"models/{model}":
        return _invalid(
            f"Model names must match: the request is for models/{model}, got {given}."
        )  # unverified
    content = item.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts:
        return _invalid("* EmbedContentRequest.content: contents is not specified\n")
    if not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
        return _invalid(
            "* EmbedContentRequest.content.parts: only text parts can be embedded\n"
        )  # unverified
    task = item.get("taskType")
    if task is not None and task not in TASK_TYPES:
        return _invalid(
            "Invalid value at 'task_type' "
            f'(type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), "{task}"'
        )
    dimensions = item.get("outputDimensionality")
    if dimensions is not None and (type(dimensions) is not int or dimensions <= 0):
        return _invalid("* EmbedContentRequest.output_dimensionality: must be positive\n")  # unverified
    return None


def _embedding(item: dict) -> dict:
    text = " ".join(p["text"] for p in item["content"]["parts"])
    size = item.get("outputDimensionality") or 8
    seed = zlib.crc32(text.encode())
    return {"values": [round(((seed >> i) % 1000) / 1000, 3) for i in range(size)]}


async def _embed(
    request: web.Request, state: SimulatorState, model: str, action: str, headers: dict[str, str]
) -> web.Response:
    """`:embedContent` and `:batchEmbedContents`, as strict about their bodies as Google."""
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        body = None
    batch = action == "batchEmbedContents"
    items = body.get("requests") if batch and isinstance(body, dict) else [body]
    rejection = None
    if batch and (
        not isinstance(body, dict) or set(body) != {"requests"} or not isinstance(items, list) or not items
    ):
        rejection = _invalid("* BatchEmbedContentsRequest.requests: requests is not specified\n")
    else:
        rejection = next((r for r in (_embed_rejection(i, model, batch) for i in items) if r), None)
    state.requests.append(RecordedRequest(request.path, headers, body, rejection))
    if rejection is not None:
        return json_response(error_body(rejection), rejection.status)
    if batch:
        return json_response({"embeddings": [_embedding(i) for i in items]})
    return json_response({"embedding": _embedding(body)})


def overflow(used: int, limit: int) -> Rejection:
    """Gemini's overflow: 400 INVALID_ARGUMENT "The input token count (N) exceeds the maximum
    number of tokens allowed (M)." (https://ai.google.dev/gemini-api/docs/troubleshooting:
    INVALID_ARGUMENT; wording as google-gemini/gemini-cli reports it)."""
    return _invalid(f"The input token count ({used}) exceeds the maximum number of tokens allowed ({limit}).")


def create_app(state: SimulatorState) -> web.Application:
    state.overflow = overflow

    async def models(request: web.Request) -> web.StreamResponse:
        headers = dict(request.headers)
        model, _, action = request.match_info["model_and_action"].rpartition(":")
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if key != state.api_key:
            rejection = AUTH_INVALID if key else AUTH_MISSING
            state.requests.append(RecordedRequest(request.path, headers, None, rejection))
            return json_response(
                error_body(rejection, INVALID_KEY_DETAILS if key else None), rejection.status
            )
        if action == "countTokens" and model:
            return await _count_tokens(request, state, model, headers)
        if action in ("embedContent", "batchEmbedContents") and model:
            return await _embed(request, state, model, action, headers)
        if action not in ("generateContent", "streamGenerateContent") or not model:
            rejection = Rejection(404, f"models/{model} is not found for API version v1beta.", "NOT_FOUND")
            state.requests.append(RecordedRequest(request.path, headers, None, rejection))
            return json_response(error_body(rejection), 404)
        raw = await request.read()
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            rejection = _invalid("Invalid JSON payload received. Unexpected token.")
            state.requests.append(RecordedRequest(request.path, headers, None, rejection))
            return json_response(error_body(rejection), 400)
        rejection, findings, req = check(state, body, model)
        rejection = rejection or state.over_window(len(raw))
        state.requests.append(RecordedRequest(request.path, headers, body, rejection))
        if rejection is not None:
            return json_response(error_body(rejection), rejection.status)
        state.verified_tokens += findings.verified
        state.placeholder_tokens += findings.placeholders
        item = state.next_item(body)
        fault = item if isinstance(item, Fault) else None
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.reset_before_headers:
                return await reset_connection(request)
            if fault.status is not None and fault.after_events is None:
                return json_response(
                    error_body(fault_rejection(fault.status, fault), _retry_details(fault)), fault.status
                )
        reply = (
            item
            if isinstance(item, Reply)
            else (fault.reply if fault and fault.reply else state.default_reply(body))
        )
        reply = structured.forced_call(reply, forced_tool(req))
        schema = response_json_schema(req)
        if schema is not None and not reply.tool_calls:
            reply = replace(reply, text=structured.answer_text(schema, reply))
        renderer = ReplyRenderer(state, model, req, reply, len(raw))
        if action == "streamGenerateContent":
            sse = request.query.get("alt") == "sse"
            chunks = renderer.chunks()
            frames = [_sse(c) for c in chunks] if sse else _array_frames(chunks)
            error_frame: Callable[[Fault], bytes] = _fault_frame if sse else _array_fault_frame
            headers_out = None if sse else {"Content-Type": "application/json"}
            return await stream_sse(request, state, frames, fault, error_frame, headers_out)
        if fault is not None and fault.after_events is not None:
            # a non-streamed answer has no middle: the fault hits before the body is sent
            if fault.mid_stream == "reset":
                return await reset_connection(request)
            if fault.mid_stream == "stall":
                await asyncio.sleep(fault.stall_seconds)
            else:
                status = fault.status or 500
                return json_response(
                    error_body(fault_rejection(status, fault), _retry_details(fault)), status
                )
        return json_response(renderer.body())

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1beta/models/{model_and_action}", models)
    return app
