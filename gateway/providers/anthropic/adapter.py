"""Anthropic Messages API (/v1/messages): request encoding, error classification and the
adapter. Messages and their content blocks are anthropic_content's; stream and body decoding live
in `decode` (the meta layouts are documented there and read back when encoding).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.providers.anthropic.decode import ERROR_TYPES, KEY_ECHO, AnthropicStreamDecoder, decode_response
from gateway.providers.anthropic.schema import anthropic_output_schema
from gateway.providers.anthropic_content import cached, messages_wire
from gateway.providers.base import (
    Adapter,
    EncodeError,
    Family,
    HttpRequest,
    category_for_status,
    hosted_tool_specs,
    join_url,
    loads_or_none,
    overflow_code,
    retry_after_header,
)
from gateway.providers.held_wire import PLACE, Rendered
from gateway.providers.structured import output_schema, output_tool_description, output_tool_name
from gateway.transcript.events import ErrorCategory, Event, UpstreamError
from gateway.transcript.model import (
    Request,
    ToolChoiceMode,
    ToolKind,
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

KIND = "anthropic"
API_VERSION = "2023-06-01"
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
# max_tokens is required by the API; with thinking it must also exceed budget_tokens, so the
# default leaves this much room for the answer on top of the budget
DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024  # the API rejects smaller budgets
MAX_THINKING_BUDGET = 128000  # the largest max_tokens of any Claude model
EFFORT_BUDGETS = {"minimal": 1024, "low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768}
# Extended thinking (https://docs.claude.com/en/docs/build-with-claude/extended-thinking):
# `thinking: {type: enabled, budget_tokens >= 1024}` on Claude 3.7 and the 4 models, off when the
# field is absent; Opus/Sonnet 4.6 and later also size their own thinking (`type: adaptive`).
# Claude 3.5 and older do not think.
THINKING = ThinkingRule(
    (
        ThinkingModel(
            r"claude-(?:opus|sonnet)-(?:4-[6-9]|[5-9])(?:\D|$)",
            budgets=(MIN_THINKING_BUDGET, MAX_THINKING_BUDGET),
            adaptive=True,
        ),
        ThinkingModel(
            r"claude-(?:(?:opus|sonnet|haiku)-(?:4|[5-9])|3-7-sonnet)",
            budgets=(MIN_THINKING_BUDGET, MAX_THINKING_BUDGET),
        ),
    ),
    EFFORT_BUDGETS,
)
# with thinking on the API accepts top_p only in [0.95, 1] and rejects any temperature
MIN_TOP_P_WITH_THINKING = 0.95

# client `anthropic-beta` flags passed through: features whose request and answer shapes this
# adapter handles. Tool search (advanced-tool-use) is not among them: the gateway sends every tool
# definition up front, to every provider family.
CLIENT_BETAS = frozenset(
    (
        "claude-code-20250219",
        INTERLEAVED_THINKING_BETA,
        "context-management-2025-06-27",
        "thinking-token-count-2026-05-13",
        "effort-2025-11-24",
        "fine-grained-tool-streaming-2025-05-14",
        "token-efficient-tools-2025-02-19",
        "prompt-caching-2024-07-31",
        "extended-cache-ttl-2025-04-11",
        "output-128k-2025-02-19",
        "context-1m-2025-08-07",
        "web-fetch-2025-09-10",
        "code-execution-2025-08-25",
    )
)
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"

CAPABILITIES = Capabilities(
    tool_ids=ToolIdRule(pattern=r"^[a-zA-Z0-9_-]+$", max_len=64, style="prefixed", prefix="toolu_"),
    # "claude-sonnet-4-5", "claude-3-5-haiku-20241022"
    model_names=ModelNameRule(r"[A-Za-z0-9][A-Za-z0-9._-]*", 128),
    reasoning_replay=True,
    signed_thinking_for_tool_loop=True,
    first_message_user=True,
    merge_assistant_runs=True,
    merge_user_turns=True,
    reasoning_leads_message=True,
    blank_text_forbidden=True,
    thinking_forbids_forced_tool_choice=True,
    min_thinking_budget=MIN_THINKING_BUDGET,
    # native JSON outputs (`output_config.format`) are generally available on the 4.5 models and
    # later; older models answer through a forced tool, and there is no JSON-object mode
    structured_output=StructuredOutput(
        schema_models=r"claude-(?:opus|sonnet|haiku)-(?:4-[5-9]|[5-9])(?:\D|$)",
        json_object=False,
        fallback=OutputMode.FORCED_TOOL,
    ),
    max_cache_breakpoints=4,  # "A maximum of 4 blocks with cache_control may be provided"
    server_tool_replay=True,
    # tool_result content: "a list of content blocks (text, image, document)"
    # (https://docs.claude.com/en/docs/agents-and-tools/tool-use/implement-tool-use, "Handling
    # results from client tools"); images JPEG/PNG/GIF/WebP up to 5 MB each through the API
    # (https://docs.claude.com/en/docs/build-with-claude/vision, "Image size limits"); PDFs
    # inline or by URL (https://docs.claude.com/en/docs/build-with-claude/pdf-support)
    media=MediaRule(
        tool_result_images=MediaPlacement.INLINE,
        tool_result_documents=MediaPlacement.INLINE,
        max_image_bytes=5 * 1024 * 1024,
        pdf_data=True,
        document_urls=True,
    ),
    client_betas=CLIENT_BETAS,
    thinking=THINKING,
)

# lower-cased fragments of 400 messages (PROVIDERS.md) that rejection recovery acts on
CONTINUITY_MARKERS = (
    "invalid `signature`",
    "must start with a thinking block",
    "cannot be modified",
    "first block must be thinking",
    "cannot contain `thinking`",
    "final block in an assistant message cannot be `thinking`",
)
PAIRING_MARKERS = (
    "`tool_use` ids were found without `tool_result`",
    "unexpected `tool_use_id`",
    "`tool_use` ids must be unique",
)
# a context-window overflow ("prompt is too long: 250000 tokens > 200000 maximum")
CONTEXT_OVERFLOW_MARKERS = ("prompt is too long",)
MAX_ERROR_TEXT = 1000


# -- request -----------------------------------------------------------------------------------


def thinking_budget(request: Request, target: Target) -> int | None:
    """Budget tokens of the decided thinking (the smallest the API takes when the model sizes its
    own), None for thinking off."""
    choice = decision_of(request, target, CAPABILITIES).reasoning
    if not choice.on:
        return None
    return choice.budget if choice.budget is not None else MIN_THINKING_BUDGET


def _system(request: Request) -> str | list[dict[str, Any]]:
    """A string, unless a block carries a cache breakpoint: then the blocks as sent."""
    if not any(b.cache is not None for b in request.system):
        return request.system_text()
    return [cached({"type": "text", "text": b.text}, b.cache) for b in request.system if b.text]


def _tool_choice(request: Request) -> dict[str, Any] | None:
    choice = request.tool_choice
    if choice is None and request.parallel_tool_calls is not False:
        return None
    mode = choice.mode if choice is not None else ToolChoiceMode.AUTO
    if mode is ToolChoiceMode.NONE:
        return {"type": "none"}
    if mode is ToolChoiceMode.TOOL:
        name = choice.name if choice is not None else None
        if not name:
            raise EncodeError("tool_choice TOOL needs a tool name")
        out: dict[str, Any] = {"type": "tool", "name": name}
    elif mode is ToolChoiceMode.REQUIRED:
        out = {"type": "any"}
    else:
        out = {"type": "auto"}
    if request.parallel_tool_calls is False:
        out["disable_parallel_tool_use"] = True
    return out


def _tool(tool: ToolSpec) -> dict[str, Any]:
    if tool.kind is not ToolKind.FUNCTION:
        raise EncodeError(f"tool {tool.name!r}: custom (freeform) tools must be mapped to function tools")
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = dict(tool.parameters)
    return cached(out, tool.cache)


def _structured_output(request: Request, target: Target, body: dict[str, Any]) -> None:
    """Native JSON outputs where the model has them; elsewhere one more tool whose input is the
    answer, forced (the decoder turns its input back into text). The tool goes after the
    client's, so the cached tools prefix stays as it was."""
    fmt = request.response_format
    mode = decision_of(request, target, CAPABILITIES).output
    if fmt is None or mode is None:
        return
    if mode is OutputMode.SCHEMA:
        assert fmt.schema is not None
        output = body.setdefault("output_config", {})
        output["format"] = {"type": "json_schema", "schema": anthropic_output_schema(fmt.schema)}
        return
    if mode is not OutputMode.FORCED_TOOL:
        raise EncodeError(f"structured output mode {mode.value} is not an Anthropic one")
    schema = output_schema(fmt)
    if schema.get("type") != "object":
        raise EncodeError(
            f"{target.model} answers structured output through a tool, whose input must be an object"
        )
    name = output_tool_name(request)
    tool = {"name": name, "description": output_tool_description(fmt), "input_schema": dict(schema)}
    body.setdefault("tools", []).append(tool)
    choice = request.tool_choice
    # the client's own tools stay callable: the model must call a tool, its own or the answer
    if request.tools and (choice is None or choice.mode is not ToolChoiceMode.NONE):
        forced: dict[str, Any] = {"type": "any"}
    else:
        forced = {"type": "tool", "name": name}
    if request.parallel_tool_calls is False:
        forced["disable_parallel_tool_use"] = True
    body["tool_choice"] = forced


def _payload(request: Request, target: Target) -> tuple[dict[str, Any], list[str], Rendered]:
    """The request body (without `stream`; its messages standing as `PLACE`, which
    `Rendered.dumps` fills), the beta flags it needs and the rendered messages."""
    budget = thinking_budget(request, target)
    max_tokens = request.max_tokens
    if budget is not None:
        if max_tokens is None:
            max_tokens = budget + DEFAULT_MAX_TOKENS
        elif budget >= max_tokens:
            # the client's limit covers thinking too: shrink the budget to fit under it
            budget = max_tokens - 1 if max_tokens - 1 >= MIN_THINKING_BUDGET else None
    elif max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS

    options = request.provider_options.get(KIND, {})
    betas: list[str] = list(options.get("betas", ()))
    body: dict[str, Any] = {"model": target.model, "max_tokens": max_tokens}
    if request.system:
        body["system"] = _system(request)
    rendered = messages_wire(request, target)  # here: its errors before the other fields'
    body["messages"] = PLACE
    tools = [_tool(t) for t in request.tools]
    tools.extend(hosted_tool_specs(request, KIND))
    if tools:
        body["tools"] = tools
        choice = _tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
    _structured_output(request, target, body)
    if budget is not None:
        adaptive = decision_of(request, target, CAPABILITIES).reasoning.adaptive
        body["thinking"] = {"type": "adaptive"} if adaptive else {"type": "enabled", "budget_tokens": budget}
        if options.get("thinking_display"):
            body["thinking"]["display"] = options["thinking_display"]
        betas.append(INTERLEAVED_THINKING_BETA)
        if request.top_p is not None and request.top_p >= MIN_TOP_P_WITH_THINKING:
            body["top_p"] = request.top_p
    else:
        if request.temperature is not None:
            # Claude 4.5+ refuse temperature and top_p together: temperature wins
            body["temperature"] = request.temperature
        elif request.top_p is not None:
            body["top_p"] = request.top_p
        if request.top_k is not None:  # refused with thinking on
            body["top_k"] = request.top_k
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    _client_options(body, options, budget is not None, betas)
    return body, betas, rendered


def _client_options(
    body: dict[str, Any], options: Mapping[str, Any], thinking: bool, betas: list[str]
) -> None:
    """Anthropic-only fields a Messages client sent, where they are valid for this request."""
    metadata = options.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("user_id"), str):
        body["metadata"] = {"user_id": metadata["user_id"]}
    tier = options.get("service_tier")
    if tier in ("auto", "standard_only"):
        body["service_tier"] = tier
    management = options.get("context_management")
    if isinstance(management, Mapping) and isinstance(management.get("edits"), list):
        # clearing thinking blocks needs thinking on (repair may have turned it off)
        edits = [e for e in management["edits"] if thinking or not _clears_thinking(e)]
        if edits:
            body["context_management"] = {**management, "edits": edits}
            betas.append(CONTEXT_MANAGEMENT_BETA)


def _clears_thinking(edit: object) -> bool:
    return isinstance(edit, Mapping) and str(edit.get("type", "")).startswith("clear_thinking")


def _headers(api_key: str, betas: list[str]) -> dict[str, str]:
    headers = {"x-api-key": api_key, "anthropic-version": API_VERSION, "content-type": "application/json"}
    if betas:
        headers["anthropic-beta"] = ",".join(dict.fromkeys(betas))
    return headers


def encode_request(request: Request, target: Target, api_key: str) -> HttpRequest:
    body, betas, rendered = _payload(request, target)
    body["stream"] = request.stream
    url = join_url(target.base_url, "/v1/messages")
    return HttpRequest(url, _headers(api_key, betas), rendered.dumps(body))


# what a count_tokens request takes of a Messages request
_COUNTED = ("model", "system", "messages", "tools", "tool_choice", "thinking", "context_management")


def encode_count(request: Request, target: Target, api_key: str) -> HttpRequest:
    """`POST /v1/messages/count_tokens`: the request as it would be sent, without max_tokens."""
    body, betas, rendered = _payload(request, target)
    body["messages"] = orjson.Fragment(rendered.text())
    counted = {k: body[k] for k in _COUNTED if k in body}
    url = join_url(target.base_url, "/v1/messages/count_tokens")
    return HttpRequest(url, _headers(api_key, betas), orjson.dumps(counted))


def decode_count(body: bytes) -> int | None:
    parsed = loads_or_none(body)
    value = parsed.get("input_tokens") if isinstance(parsed, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# -- errors ------------------------------------------------------------------------------------


def classify_error(status: int, headers: Mapping[str, str], body: bytes) -> UpstreamError:
    parsed = loads_or_none(body)
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        etype = str(error.get("type") or "")
        message = str(error.get("message") or etype or f"HTTP {status}")
    else:
        etype = ""
        message = body[:MAX_ERROR_TEXT].decode("utf-8", "replace").strip() or f"HTTP {status}"
    category = ERROR_TYPES.get(etype) or category_for_status(status)
    if category is ErrorCategory.INVALID_REQUEST:
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
        code=overflow_code(message, None, CONTEXT_OVERFLOW_MARKERS),
        retry_after=retry_after_header(headers),
    )


def stream_decoder(target: Target, request: Request | None = None) -> AnthropicStreamDecoder:
    return AnthropicStreamDecoder(target, request, CAPABILITIES)


def decode_body(body: bytes, target: Target, request: Request | None = None) -> list[Event]:
    return decode_response(body, target, request, CAPABILITIES)


ADAPTER = Adapter(
    KIND,
    CAPABILITIES,
    encode_request,
    stream_decoder,
    decode_body,
    classify_error,
    count=encode_count,
    count_answer=decode_count,
)
FAMILY = Family(
    ADAPTER,
    credential_header="x-api-key",
    simulator_path="/anthropic",
    headers=("anthropic-version", "anthropic-beta"),
    key_echo=KEY_ECHO,
)
