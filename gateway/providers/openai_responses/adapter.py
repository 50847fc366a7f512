"""OpenAI Responses API (/responses), used statelessly: request encoding, error classification
and the adapter. Stream and body decoding live in `decode` (the meta layouts are
documented there and read back here when encoding).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.providers.base import (
    Adapter,
    EncodeError,
    Family,
    HttpRequest,
    category_for_status,
    document_text,
    hosted_tool_specs,
    join_url,
    loads_or_none,
    overflow_code,
    retry_after_header,
)
from gateway.providers.openai_responses.decode import (
    KEY_ECHO,
    ResponsesStreamDecoder,
    decode_response,
    error_category,
)
from gateway.transcript.events import ErrorCategory, UpstreamError
from gateway.transcript.model import (
    Continuity,
    Document,
    Image,
    Message,
    Reasoning,
    Request,
    Role,
    ServerToolCall,
    ServerToolResult,
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
    Target,
    ThinkingModel,
    ThinkingRule,
    ToolIdRule,
)
from gateway.wire.openai_server import paired, wire_annotation, wire_item

# Role's members, looked up once: an enum member's lookup costs ~75 ns, per message here
_ASSISTANT = Role.ASSISTANT
_SYSTEM = Role.SYSTEM

KIND = "openai_responses"

# OpenAI's names ("gpt-5.1", fine-tunes "ft:gpt-4.1-mini:acme::9abcDEF") and those of servers that
# speak its APIs, which name models "org/model" ("meta-llama/Llama-3.3-70B-Instruct"); the name only
# travels in the JSON body
OPENAI_MODEL_NAMES = ModelNameRule(r"[A-Za-z0-9][A-Za-z0-9._:/-]*", 256)

# models without image input (https://platform.openai.com/docs/models: gpt-3.5-turbo, o1-mini
# and o3-mini list "Image: not supported"); every other model takes images
OPENAI_VISION_MODELS = r"(?!gpt-3\.5|o1-mini|o3-mini)"
# Reasoning models (https://platform.openai.com/docs/guides/reasoning) take `reasoning.effort`
# (chat: `reasoning_effort`), each its own levels: "none" (reasoning off) exists from gpt-5.1 on,
# gpt-5 takes "minimal" as its least, the o-series low/medium/high, gpt-5-pro only high ("Unsupported
# value: 'reasoning_effort' does not support 'none' with this model. Supported values are:
# 'minimal', 'low', 'medium', and 'high'."). Other models (gpt-4.1, gpt-4o, gpt-5-chat) take no
# effort at all ("Unsupported parameter: 'reasoning.effort' is not supported with this model.").
# Reasoning models also refuse sampling parameters.
_FT = r"(?:ft:)?"
OPENAI_THINKING = ThinkingRule(
    (
        ThinkingModel(_FT + r"gpt-5(?:\.\d+)?-pro", can_off=False, efforts=("high",)),
        ThinkingModel(_FT + r"gpt-5-chat", reasons=False),
        ThinkingModel(_FT + r"gpt-5\.1", efforts=("low", "medium", "high")),
        ThinkingModel(_FT + r"gpt-5\.\d", efforts=("low", "medium", "high", "xhigh")),
        ThinkingModel(_FT + r"gpt-5", can_off=False, efforts=("minimal", "low", "medium", "high")),
        ThinkingModel(_FT + r"o[1-9]", can_off=False, efforts=("low", "medium", "high")),
    )
)

CAPABILITIES = Capabilities(
    tool_ids=ToolIdRule(pattern=r"^[a-zA-Z0-9_-]+$", max_len=64, style="prefixed", prefix="call_"),
    model_names=OPENAI_MODEL_NAMES,
    reasoning_replay=True,
    reasoning_precedes_output=True,
    system_messages_in_place=True,
    custom_tools=True,
    server_tool_replay=True,
    # function_call_output `output`: "a string or a list of input_text, input_image and
    # input_file content" (https://platform.openai.com/docs/api-reference/responses/create,
    # input > function tool call output); images PNG/JPEG/WebP/non-animated GIF, up to 50 MB per
    # request (https://platform.openai.com/docs/guides/images-vision, "Image input requirements")
    media=MediaRule(
        tool_result_images=MediaPlacement.INLINE,
        tool_result_documents=MediaPlacement.INLINE,
        max_image_bytes=50 * 1024 * 1024,
        vision_models=OPENAI_VISION_MODELS,
        pdf_data=True,
        document_urls=True,
    ),
    thinking=OPENAI_THINKING,
)

# lower-cased fragments of 400/404 messages (PROVIDERS.md) that rejection recovery acts on
CONTINUITY_MARKERS = (
    "without its required 'reasoning' item",
    "without its required following item",
    "item with id 'rs_",
    "encrypted content for item",
    "could not be decrypted",
)
PAIRING_MARKERS = (
    "no tool call found for function call output",
    "no tool output found for function call",
)
MAX_ERROR_TEXT = 1000


# -- request -----------------------------------------------------------------------------------


def _image(image: Image) -> dict[str, Any]:
    return {"type": "input_image", "image_url": image.url, "detail": image.detail or "auto"}


def _document(document: Document) -> dict[str, Any]:
    text = document_text(document)
    if text is not None:
        return {"type": "input_text", "text": text}
    part: dict[str, Any] = {"type": "input_file", "filename": document.title or "document.pdf"}
    if document.source.startswith("data:"):
        part["file_data"] = document.source
    else:
        part["file_url"] = document.source
    return part


def _function_output(block: ToolResult, custom_calls: set[str]) -> dict[str, Any]:
    output: str | list[dict[str, Any]] = block.content
    if block.images or block.documents:
        parts: list[dict[str, Any]] = [{"type": "input_text", "text": block.content}] if block.content else []
        parts.extend(_image(image) for image in block.images)
        parts.extend(_document(document) for document in block.documents)
        output = parts
    kind = "custom_tool_call_output" if block.call_id in custom_calls else "function_call_output"
    return {"type": kind, "call_id": block.call_id, "output": output}


def _system_item(message: Message, items: list[dict[str, Any]]) -> None:
    content = []
    for block in message.blocks:
        if type(block) is not Text:
            raise EncodeError(f"{type(block).__name__} block cannot appear in a Responses system message")
        content.append({"type": "input_text", "text": block.text})
    items.append({"role": "system", "content": content})


def _user_items(message: Message, items: list[dict[str, Any]], custom_calls: set[str]) -> None:
    """User and tool messages: text and images gather into user message items, each tool
    result is its own function_call_output (custom_tool_call_output) item, in transcript order."""
    content: list[dict[str, Any]] = []
    for block in message.blocks:
        match block:
            case Text(text=text):
                content.append({"type": "input_text", "text": text})
            case Image():
                content.append(_image(block))
            case Document():
                content.append(_document(block))
            case ToolResult():
                if content:
                    items.append({"role": "user", "content": content})
                    content = []
                items.append(_function_output(block, custom_calls))
            case _:
                raise EncodeError(f"{type(block).__name__} block cannot appear in a Responses user message")
    if content:
        items.append({"role": "user", "content": content})


def _reasoning_item(block: Reasoning, target: Target) -> dict[str, Any]:
    meta = block.meta
    if meta is None or not target.owns(meta):
        raise EncodeError("reasoning without this target's continuity reached the Responses encoder")
    data = meta.data
    item_id = data.get("id")
    if not item_id:
        raise EncodeError("Responses reasoning meta has no item id")
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in data.get("summary") or ()],
    }
    if data.get("encrypted_content"):
        item["encrypted_content"] = data["encrypted_content"]
    return item


def _annotation(meta: Continuity | None, target: Target) -> dict[str, Any]:
    wire = wire_annotation(meta) if target.owns(meta) else None
    if wire is None:
        raise EncodeError("another issuer's citation reached the encoder (repair renders it)")
    return wire


def _assistant_items(message: Message, target: Target, items: list[dict[str, Any]]) -> None:
    """Assistant blocks as output items. A function_call keeps its fc_ id only when its
    reasoning item precedes it (directly, or through the calls of the same parallel batch):
    the API rejects an fc_ id whose reasoning item is missing, and accepts a call without id."""
    text_parts: list[dict[str, Any]] | None = None
    reasoning_chain = False  # the last non-call item emitted was this target's reasoning item
    for block in message.blocks:
        match block:
            case Text(text=text, citations=citations):
                if text_parts is None:
                    text_parts = []
                    items.append({"type": "message", "role": "assistant", "content": text_parts})
                part: dict[str, Any] = {"type": "output_text", "text": text}
                if citations:
                    part["annotations"] = [_annotation(c.meta, target) for c in citations]
                text_parts.append(part)
                reasoning_chain = False
                continue
            case ServerToolCall(meta=meta):
                wire = wire_item(meta) if target.owns(meta) else None
                if wire is None:
                    raise EncodeError(
                        "another issuer's server tool call reached the encoder (repair renders it)"
                    )
                items.append(wire)
                reasoning_chain = False
            case ServerToolResult(meta=meta):
                if not (target.owns(meta) and paired(meta)):
                    raise EncodeError(
                        "another issuer's server tool result reached the encoder (repair renders it)"
                    )
                continue  # its call's item carries it
            case Reasoning():
                items.append(_reasoning_item(block, target))
                reasoning_chain = True
            case ToolCall(id=call_id, name=name, arguments=arguments, meta=meta):
                if block.custom:
                    item: dict[str, Any] = {
                        "type": "custom_tool_call",
                        "call_id": call_id,
                        "name": name,
                        "input": arguments,
                    }
                else:
                    item = {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": name,
                        "arguments": arguments if arguments.strip() else "{}",
                    }
                if reasoning_chain and meta is not None and target.owns(meta) and meta.data.get("item_id"):
                    item["id"] = meta.data["item_id"]
                items.append(item)
            case _:
                raise EncodeError(
                    f"{type(block).__name__} block cannot appear in a Responses assistant message"
                )
        text_parts = None


def _tool_choice(request: Request) -> str | dict[str, Any] | None:
    choice = request.tool_choice
    if choice is None:
        return None
    if choice.mode is ToolChoiceMode.TOOL:
        if not choice.name:
            raise EncodeError("tool_choice TOOL needs a tool name")
        custom = any(t.name == choice.name and t.kind is ToolKind.CUSTOM for t in request.tools)
        return {"type": "custom" if custom else "function", "name": choice.name}
    return choice.mode.value  # auto | none | required: the API's own words


def _text_format(request: Request) -> dict[str, Any]:
    fmt = request.response_format
    assert fmt is not None
    if fmt.schema is None:
        return {"type": "json_object"}
    out: dict[str, Any] = {"type": "json_schema", "name": fmt.name, "schema": dict(fmt.schema)}
    if fmt.description:
        out["description"] = fmt.description
    if fmt.strict is not None:
        out["strict"] = fmt.strict
    return out


def _tool(tool: ToolSpec) -> dict[str, Any]:
    if tool.kind is ToolKind.CUSTOM:
        out: dict[str, Any] = {"type": "custom", "name": tool.name}
        if tool.description:
            out["description"] = tool.description
        if tool.format is not None:
            out["format"] = dict(tool.format)
        return out
    out = {"type": "function", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = dict(tool.parameters)
    # strict mode makes the API refuse ordinary JSON schemas: only when the client asked for it
    out["strict"] = bool(tool.strict)
    return out


def encode_request(request: Request, target: Target, api_key: str) -> HttpRequest:
    items: list[dict[str, Any]] = []
    custom_calls = {b.id for m in request.messages for b in m.blocks if type(b) is ToolCall and b.custom}
    for message in request.messages:
        if message.role is _ASSISTANT:
            _assistant_items(message, target, items)
        elif message.role is _SYSTEM:
            _system_item(message, items)
        else:
            _user_items(message, items, custom_calls)
    if request.stop:
        raise EncodeError("the Responses API takes no stop sequences")
    decision = decision_of(request, target, CAPABILITIES)
    # reasoning models return encrypted reasoning items and refuse temperature/top_p
    reasoning_model = OPENAI_THINKING.model(target.model).reasons
    # stateless: nothing is stored upstream, so reasoning travels back as encrypted content
    body: dict[str, Any] = {"model": target.model, "store": False}
    if reasoning_model:
        body["include"] = ["reasoning.encrypted_content"]
    if request.system:
        body["instructions"] = request.system_text()
    body["input"] = items
    hosted = hosted_tool_specs(request, KIND)
    if request.tools or hosted:
        body["tools"] = [*(_tool(t) for t in request.tools), *hosted]
        choice = _tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    choice = decision.reasoning
    if reasoning_model and not choice.default:
        if not choice.on:
            body["reasoning"] = {"effort": "none"}
        elif decision.shown:  # summaries only for a client that sees them
            body["reasoning"] = {"effort": choice.effort, "summary": request.reasoning_summary or "auto"}
        else:
            body["reasoning"] = {"effort": choice.effort}
    if decision.output is not None:
        body.setdefault("text", {})["format"] = _text_format(request)
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    # reasoning models refuse sampling parameters ("Unsupported parameter: 'temperature'")
    if not reasoning_model:
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key
    body["stream"] = request.stream
    headers = {"Authorization": f"Bearer {api_key}", "content-type": "application/json"}
    return HttpRequest(join_url(target.base_url, "/responses"), headers, orjson.dumps(body))


# -- errors ------------------------------------------------------------------------------------


def classify_error(status: int, headers: Mapping[str, str], body: bytes) -> UpstreamError:
    parsed = loads_or_none(body)
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        code = error.get("code")
        code = str(code) if code is not None else None
        etype = str(error.get("type") or "")
        message = str(error.get("message") or code or etype or f"HTTP {status}")
        category = error_category(error, category_for_status(status))
    else:
        code, etype = None, ""
        message = body[:MAX_ERROR_TEXT].decode("utf-8", "replace").strip() or f"HTTP {status}"
        category = category_for_status(status)
    if category is ErrorCategory.INVALID_REQUEST or category is ErrorCategory.NOT_FOUND:
        lowered = message.lower()
        if any(marker in lowered for marker in PAIRING_MARKERS):
            category = ErrorCategory.PAIRING
        elif any(marker in lowered for marker in CONTINUITY_MARKERS):
            category = ErrorCategory.CONTINUITY
    return UpstreamError(
        category,
        KEY_ECHO.redact(message),
        status=status,
        type=etype,
        code=overflow_code(message, code, ("maximum context length",)),
        retry_after=retry_after_header(headers),
    )


ADAPTER = Adapter(KIND, CAPABILITIES, encode_request, ResponsesStreamDecoder, decode_response, classify_error)
FAMILY = Family(
    ADAPTER, credential_header="authorization", simulator_path="/openai_responses/v1", key_echo=KEY_ECHO
)
