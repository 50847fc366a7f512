"""Gemini request encoding: canonical Request -> generateContent body, with each owned
thoughtSignature put back on the part it came from and tool schemas cut down to the OpenAPI
subset Gemini accepts."""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, urlsplit

import orjson

from gateway.providers.base import (
    EncodeError,
    HttpRequest,
    hosted_tool_specs,
    join_url,
    loads_or_none,
    parse_arguments,
    tool_call_names,
)
from gateway.transcript.model import (
    Continuity,
    Document,
    Image,
    Reasoning,
    Request,
    Role,
    Text,
    ToolCall,
    ToolChoiceMode,
    ToolKind,
    ToolResult,
    ToolSpec,
)
from gateway.transcript.reasoning import decision_of
from gateway.transcript.target import (
    Capabilities,
    MediaPlacement,
    MediaRule,
    ModelNameRule,
    OutputMode,
    StructuredOutput,
    Target,
    ThinkingModel,
    ThinkingRule,
    ToolIdRule,
)

# Role's members, looked up once: an enum member's lookup costs ~75 ns, per message here
_USER = Role.USER
_ASSISTANT = Role.ASSISTANT
_TOOL = Role.TOOL

# JSON output (`responseMimeType` + `responseJsonSchema`, which takes JSON Schema as it is, unlike
# `responseSchema`) on every model; together with function calling only on Gemini 3 ("Function
# calling with a response mime type: 'application/json' is unsupported" before it)
STRUCTURED_OUTPUT = StructuredOutput(with_tools_models=r"gemini-3")

SIGNATURE = "thought_signature"  # key of the signature in Continuity.data

# Thinking (https://ai.google.dev/gemini-api/docs/thinking): Gemini 3 takes `thinkingLevel`
# ("You cannot disable thinking for Gemini 3 Pro"; 3 Pro takes low and high, 3 Flash also minimal
# and medium); Gemini 2.5 takes `thinkingBudget` (2.5 Pro 128-32768 and cannot turn thinking off,
# "Budget 0 is invalid. This model only works in thinking mode."; 2.5 Flash 0-24576, 0 is off;
# Flash-Lite 512-24576); both together are refused. Thoughts come back only with includeThoughts.
_MODELS = r"(?:models/)?"
THINKING = ThinkingRule(
    (
        ThinkingModel(
            _MODELS + r"gemini-3(?:\.\d+)?-flash", can_off=False, efforts=("minimal", "low", "medium", "high")
        ),
        ThinkingModel(_MODELS + r"gemini-3", can_off=False, efforts=("low", "high")),
        ThinkingModel(_MODELS + r"gemini-2\.5-pro", can_off=False, budgets=(128, 32768)),
        ThinkingModel(_MODELS + r"gemini-2\.5-flash-lite", budgets=(512, 24576)),
        ThinkingModel(_MODELS + r"gemini-2\.5-flash", budgets=(1, 24576)),
    ),
    # the budget of an effort on a 2.5 model
    MappingProxyType({"minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 32768}),
)

CAPABILITIES = Capabilities(
    tool_ids=ToolIdRule(pattern=r"^[A-Za-z0-9_-]{1,64}$", max_len=64, style="prefixed", prefix="call_"),
    # the name is a URL path segment ("models/{model}:generateContent"): no "/" but the optional
    # "models/" prefix, and no ":"
    model_names=ModelNameRule(r"(?:models/)?[A-Za-z0-9][A-Za-z0-9._-]*", 128),
    reasoning_replay=True,
    # base64 of "skip_thought_signature_validator", the dummy Google documents for moved traces
    thought_signature_placeholder="c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I=",
    thought_signature_key=SIGNATURE,
    calls_follow_user_turn=True,
    merge_tool_runs=True,
    structured_output=STRUCTURED_OUTPUT,
    thinking=THINKING,
    # a functionResponse's `response` is a JSON object; only Gemini 3 adds inline media parts
    # to it (https://ai.google.dev/gemini-api/docs/function-calling#multimodal), so a tool's
    # images and PDFs go, for every model, as parts of a user turn after the responses. PNG, JPEG,
    # WEBP, HEIC, HEIF; inline data up to 20 MB per request
    # (https://ai.google.dev/gemini-api/docs/image-understanding)
    media=MediaRule(
        tool_result_images=MediaPlacement.AFTER,
        tool_result_documents=MediaPlacement.AFTER,
        image_types=frozenset(("image/png", "image/jpeg", "image/webp", "image/heic", "image/heif")),
        max_image_bytes=20 * 1024 * 1024,
        pdf_data=True,
        document_urls=True,
    ),
)

FUNCTION_CALLING_MODES: Mapping[ToolChoiceMode, str] = MappingProxyType(
    {
        ToolChoiceMode.AUTO: "AUTO",
        ToolChoiceMode.NONE: "NONE",
        ToolChoiceMode.REQUIRED: "ANY",
        ToolChoiceMode.TOOL: "ANY",
    }
)

# The OpenAPI-subset keys Gemini's function `parameters` accept; everything else (JSON-schema
# extras such as additionalProperties, $schema, examples) makes the API reject the request.
SCHEMA_KEYS = frozenset(
    [
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    ]
)

_REF_PREFIXES = ("#/$defs/", "#/definitions/")


def _body(request: Request, target: Target) -> dict[str, Any]:
    hosted = hosted_tool_specs(request, target.kind)  # Google's built-in tools (googleSearch...)
    if any(tool.kind is not ToolKind.FUNCTION for tool in request.tools):
        raise EncodeError("custom (freeform) tools must be mapped to function tools")
    names = tool_call_names(request)
    contents: list[dict[str, Any]] = []
    previous: Role | None = None
    for position, message in enumerate(request.messages):
        try:
            if message.role is _TOOL:
                if previous is _TOOL:
                    # results of one step answer one function-call turn: repair merged them
                    raise EncodeError("two tool messages in a row (repair merges them)")
                parts = [_function_response(block, names) for block in message.blocks]
                role = "user"
            elif message.role is _USER:
                parts = [_user_part(block) for block in message.blocks]
                role = "user"
            elif message.role is _ASSISTANT:
                parts = [_model_part(block, target) for block in message.blocks]
                role = "model"
            else:
                raise EncodeError(f"a {message.role.value} message reached the encoder (repair moves it)")
        except EncodeError as exc:
            raise EncodeError(f"messages[{position}]: {exc}") from None
        previous = message.role
        parts = [p for p in parts if p is not None]
        if parts:  # an empty message says nothing, and Gemini rejects a content without parts
            contents.append({"role": role, "parts": parts})
    body: dict[str, Any] = {"contents": contents}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system_text()}]}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(tool) for tool in request.tools]}]
    if hosted:
        body.setdefault("tools", []).extend(hosted)
    if request.tool_choice is not None and request.tools:  # refused without declarations
        config: dict[str, Any] = {"mode": FUNCTION_CALLING_MODES[request.tool_choice.mode]}
        if request.tool_choice.mode is ToolChoiceMode.TOOL:
            if not request.tool_choice.name:
                raise EncodeError("tool_choice names no tool")
            config["allowedFunctionNames"] = [request.tool_choice.name]
        body["toolConfig"] = {"functionCallingConfig": config}
    generation = _generation_config(request, target)
    _structured_output(request, target, generation)
    if generation:
        body["generationConfig"] = generation
    return body


def _model_path(target: Target) -> str:
    return "/v1beta/models/" + quote(target.model.removeprefix("models/"), safe="-._~")


def _headers(api_key: str) -> dict[str, str]:
    # the key goes in a header only: URLs end up in logs and proxies
    return {"x-goog-api-key": api_key, "Content-Type": "application/json"}


def encode_request(request: Request, target: Target, api_key: str) -> HttpRequest:
    body = _body(request, target)
    model = _model_path(target)
    if request.stream:
        path = f"{model}:streamGenerateContent?alt=sse"
    else:
        path = f"{model}:generateContent"
    return HttpRequest(join_url(target.base_url, path), _headers(api_key), orjson.dumps(body))


def encode_count(request: Request, target: Target, api_key: str) -> HttpRequest:
    """`:countTokens` over the whole generateContent request (system instruction and tools
    count too)."""
    model = _model_path(target)
    body = {"generateContentRequest": {"model": model.removeprefix("/v1beta/"), **_body(request, target)}}
    url = join_url(target.base_url, f"{model}:countTokens")
    return HttpRequest(url, _headers(api_key), orjson.dumps(body))


def decode_count(body: bytes) -> int | None:
    parsed = loads_or_none(body)
    value = parsed.get("totalTokens") if isinstance(parsed, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _generation_config(request: Request, target: Target) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if request.max_tokens is not None:
        config["maxOutputTokens"] = request.max_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["topP"] = request.top_p
    if request.top_k is not None:
        config["topK"] = request.top_k
    if request.stop:
        config["stopSequences"] = list(request.stop)
    thinking = _thinking_config(request, target)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    return config


def _thinking_config(request: Request, target: Target) -> dict[str, Any] | None:
    """The decided reasoning as Gemini's thinkingConfig (None: the model's default, or a model
    that does not think)."""
    decision = decision_of(request, target, CAPABILITIES)
    choice = decision.reasoning
    if choice.default:
        return None
    if not choice.on:
        return {"thinkingBudget": 0} if THINKING.model(target.model).reasons else None
    config: dict[str, Any] = {}
    if choice.effort is not None:
        config["thinkingLevel"] = choice.effort
    else:  # a budget, or -1: the model sizes its own thinking
        config["thinkingBudget"] = choice.budget if choice.budget is not None else -1
    if decision.shown:
        config["includeThoughts"] = True
    return config


def _structured_output(request: Request, target: Target, config: dict[str, Any]) -> None:
    fmt = request.response_format
    mode = decision_of(request, target, CAPABILITIES).output
    if fmt is None or mode is None:
        return
    if request.tools and not STRUCTURED_OUTPUT.with_tools(target.model):
        raise EncodeError(
            f"{target.model} cannot combine function calling with a JSON response format "
            "(Gemini 3 models can)"
        )
    config["responseMimeType"] = "application/json"
    if mode is OutputMode.SCHEMA:
        config["responseJsonSchema"] = dict(fmt.schema or {})


def _owned_signature(meta: Continuity | None, target: Target) -> str | None:
    if meta is None or not target.owns(meta):
        return None
    return meta.data.get(SIGNATURE) or None


def _model_part(block: object, target: Target) -> dict[str, Any] | None:
    t = type(block)
    if t is Text:
        signature = _owned_signature(block.meta, target)
        if signature is None:
            return {"text": block.text} if block.text else None
        return {"text": block.text, "thoughtSignature": signature}
    if t is ToolCall:
        args = parse_arguments(block.arguments)
        if type(args) is not dict:
            raise EncodeError(f"tool call {block.id!r}: Gemini takes an arguments object")
        call: dict[str, Any] = {"name": block.name, "args": args}
        if block.id:
            call["id"] = block.id
        part: dict[str, Any] = {"functionCall": call}
        signature = _owned_signature(block.meta, target)
        if signature is not None:
            part["thoughtSignature"] = signature
        return part
    if t is Reasoning:
        if not target.owns(block.meta):
            raise EncodeError("reasoning from another issuer reached the encoder (repair must drop it)")
        part = {"text": block.text, "thought": True}
        signature = _owned_signature(block.meta, target)
        if signature is not None:
            part["thoughtSignature"] = signature
        return part
    if t is Image or t is ToolResult:
        raise EncodeError(f"a model turn cannot hold a {t.__name__} block")
    raise EncodeError(f"unsupported block {t.__name__}")


def _user_part(block: object) -> dict[str, Any] | None:
    t = type(block)
    if t is Text:
        return {"text": block.text} if block.text else None
    if t is Image:
        return _image_part(block)
    if t is Document:
        return _document_part(block)
    raise EncodeError(f"a user message cannot hold a {t.__name__} block")


def _document_part(document: Document) -> dict[str, Any]:
    source = document.source
    if source.startswith("data:"):
        _, sep, data = source.partition(",")
        if not sep or ";base64" not in source[: len(source) - len(data)]:
            raise EncodeError("document data URLs must be base64")
        return {"inlineData": {"mimeType": document.media_type, "data": data}}
    return {"fileData": {"mimeType": document.media_type, "fileUri": source}}


def _image_part(image: Image) -> dict[str, Any]:
    url = image.url
    if url.startswith("data:"):
        header, sep, data = url[5:].partition(",")
        mime, _, encoding = header.partition(";")
        if not sep or encoding != "base64" or not mime:
            raise EncodeError("image data URLs must be base64 with a media type")
        return {"inlineData": {"mimeType": mime, "data": data}}
    mime, _ = mimetypes.guess_type(urlsplit(url).path)
    if mime is None:
        raise EncodeError(f"cannot tell the media type of image {url!r}; send it as a data URL")
    return {"fileData": {"mimeType": mime, "fileUri": url}}


def _function_response(block: object, names: Mapping[str, str]) -> dict[str, Any]:
    if type(block) is not ToolResult:
        raise EncodeError(f"a tool message holds a {type(block).__name__} block")
    if block.images:
        raise EncodeError("Gemini function responses cannot carry images here")
    name = names.get(block.call_id)
    if name is None:
        raise EncodeError(f"tool result {block.call_id!r} answers no tool call in the transcript")
    response = {"error": block.content} if block.is_error else {"content": block.content}
    return {"functionResponse": {"name": name, "id": block.call_id, "response": response}}


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name, "description": tool.description}
    schema = tool.parameters
    # Gemini rejects an OBJECT schema without properties: a tool without arguments has none
    if schema and (schema.get("properties") or schema.get("type") != "object"):
        declaration["parameters"] = gemini_schema(schema)
    return declaration


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema in the OpenAPI subset Gemini accepts: local `$ref`s inlined, `oneOf` as
    `anyOf`, `type: [x, "null"]` as `nullable`, `const` as a one-value enum, the rest of the
    unsupported keys removed."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    return _schema(schema, defs, ())


def _schema(node: Mapping[str, Any], defs: Mapping[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    if type(node) is not dict:
        raise EncodeError("tool parameter schemas must be objects")
    ref = node.get("$ref")
    if ref is not None:
        name = next((ref[len(p) :] for p in _REF_PREFIXES if ref.startswith(p)), None)
        if name is None or name not in defs:
            raise EncodeError(f"tool parameter schema $ref {ref!r} cannot be resolved")
        if name in seen:
            raise EncodeError(f"tool parameter schema $ref {ref!r} is recursive; Gemini cannot express it")
        resolved = _schema(defs[name], defs, (*seen, name))
        # sibling keys of a $ref (description, ...) refine the referenced schema
        siblings = _schema({k: v for k, v in node.items() if k != "$ref"}, defs, seen)
        return {**resolved, **siblings}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: _schema(sub, defs, seen) for name, sub in value.items()}
        elif key == "items":
            out[key] = _schema(value, defs, seen)
        elif key == "anyOf" or key == "oneOf":
            out["anyOf"] = [_schema(sub, defs, seen) for sub in value]
        elif key == "type" and type(value) is list:
            kinds = [k for k in value if k != "null"]
            if len(kinds) != len(value):
                out["nullable"] = True
            if len(kinds) == 1:
                out["type"] = kinds[0]
            elif kinds:
                out["anyOf"] = [{"type": k} for k in kinds]
        elif key == "const":
            out["enum"] = [value]
        elif key in SCHEMA_KEYS:
            out[key] = value
    return out


EMBED_METHODS = ("embedContent", "batchEmbedContents")


def encode_embed(method: str, body: dict[str, Any], target: Target, api_key: str) -> HttpRequest:
    """An embeddings request for the target's model: Google's own body, its `model` fields (the
    batch's per-request ones must name the URL's model) set to the target's."""
    if method not in EMBED_METHODS:
        raise EncodeError(f"unknown embeddings method {method!r}")
    model = _model_path(target)
    name = model.removeprefix("/v1beta/")
    if method == "batchEmbedContents":
        requests = body.get("requests")
        if type(requests) is not list:
            raise EncodeError("requests: must be an array")
        body = {**body, "requests": [{**r, "model": name} if type(r) is dict else r for r in requests]}
    elif "model" in body:
        body = {**body, "model": name}
    return HttpRequest(join_url(target.base_url, f"{model}:{method}"), _headers(api_key), orjson.dumps(body))
