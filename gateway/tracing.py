"""OpenTelemetry traces (opt-in; the `otel` extra: `pip install 'llm-transcript-gateway[otel]'`).

One SERVER span per client request and one CLIENT span per upstream attempt, named
`chat {upstream model}`, with the GenAI semantic conventions; what only the gateway knows goes
under `gateway.*` (the model group, the provider entry, repairs by kind, cost). The standard SDK
and its OTLP/HTTP exporter do the work; the exporter, resource and sampler read their own
OTEL_* variables. When tracing is off the SDK is not imported and no span or attribute is made:
callers hold `None` instead of a trace.

The GenAI conventions are still in development. By default the names of their 1.36 release are
emitted (`gen_ai.system` for the provider, the cache and reasoning breakdowns as
`gateway.usage.*`); with `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` ([tracing]
semconv = "latest") the newest: `gen_ai.provider.name`, `gen_ai.usage.cache_read.input_tokens`,
`gen_ai.usage.cache_creation.input_tokens`, `gen_ai.usage.reasoning.output_tokens`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from gateway.config import TracingConfig
from gateway.metrics import RequestRecord
from gateway.repair.report import Repair
from gateway.transcript.events import UpstreamError
from gateway.transcript.model import (
    AssistantTurn,
    Document,
    Image,
    Message,
    Reasoning,
    Request,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)
from gateway.transcript.target import Target

SERVICE_NAME = "llm-transcript-gateway"
# provider kind -> the GenAI conventions' provider registry value
PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai_responses": "openai",
    "openai_chat": "openai",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "kimi": "moonshot_ai",
    "deepseek": "deepseek",
}
_LATEST_USAGE = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
)
_DEFAULT_USAGE = (
    "gateway.usage.cache_read_tokens",
    "gateway.usage.cache_write_tokens",
    "gateway.usage.reasoning_tokens",
)


class Tracing:
    """The process's tracer: spans exported over OTLP/HTTP ([tracing] endpoint, else the
    OTEL_EXPORTER_OTLP_* variables) from a background thread (BatchSpanProcessor, OTEL_BSP_*)."""

    def __init__(self, config: TracingConfig) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.propagators.textmap import DefaultGetter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.endpoint)))
        self.tracer = self.provider.get_tracer("gateway")
        self.capture_content = config.capture_content
        self.latest = config.semconv == "latest"
        self.provider_key = "gen_ai.provider.name" if self.latest else "gen_ai.system"
        self.usage_keys = _LATEST_USAGE if self.latest else _DEFAULT_USAGE
        self._propagator = TraceContextTextMapPropagator()
        self._getter = DefaultGetter()
        self.server_kind, self.client_kind = SpanKind.SERVER, SpanKind.CLIENT
        self.error_status = Status(StatusCode.ERROR)
        self.in_context = set_span_in_context

    def request(self, ingress: str, method: str, path: str, headers: Mapping[str, str]) -> RequestTrace:
        """The SERVER span of one client request, continuing the client's `traceparent`."""
        parent = self._propagator.extract(headers, getter=self._getter)
        span = self.tracer.start_span(
            f"{method} {path}",
            context=parent,
            kind=self.server_kind,
            attributes={"http.request.method": method, "url.path": path, "gateway.ingress": ingress},
        )
        return RequestTrace(self, span)

    def force_flush(self) -> None:
        self.provider.force_flush()

    def shutdown(self) -> None:
        self.provider.shutdown()


class RequestTrace:
    """One client request's span and its committed attempt's span (ended with the answer)."""

    __slots__ = ("_tracing", "span", "session", "model", "committed")

    @property
    def trace_id(self) -> str:
        return format(self.span.get_span_context().trace_id, "032x")

    def __init__(self, tracing: Tracing, span: Any) -> None:
        self._tracing = tracing
        self.span = span
        self.session = ""  # the session key's hash (gateway.access_log.session_hash)
        self.model = ""  # the model group
        self.committed: AttemptTrace | None = None

    def attempt(self, target: Target, request: Request) -> AttemptTrace:
        """A CLIENT span for one upstream call of `request` (as repaired for `target`)."""
        tracing = self._tracing
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            tracing.provider_key: PROVIDER_NAMES.get(target.kind, target.kind),
            "gen_ai.request.model": target.model,
            "gen_ai.request.stream": request.stream,
            "gateway.provider": target.provider,
            "gateway.model_group": self.model,
        }
        if self.session:
            attributes["gen_ai.conversation.id"] = self.session
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if request.top_p is not None:
            attributes["gen_ai.request.top_p"] = request.top_p
        host = urlsplit(target.base_url)
        if host.hostname:
            attributes["server.address"] = host.hostname
            attributes["server.port"] = host.port or (443 if host.scheme == "https" else 80)
        if tracing.capture_content:
            attributes["gen_ai.input.messages"] = _json(_messages(request.messages))
            if request.system:
                attributes["gen_ai.system_instructions"] = _json([_part(b) for b in request.system])
        span = tracing.tracer.start_span(
            f"chat {target.model}",
            context=tracing.in_context(self.span),
            kind=tracing.client_kind,
            attributes=attributes,
        )
        return AttemptTrace(tracing, span, target)

    def finish(
        self,
        record: RequestRecord,
        turn: AssistantTurn | None,
        error: UpstreamError | None,
        repairs: Iterable[Repair],
    ) -> None:
        """End the committed attempt's span (with the answer) and the request's (with the
        request's record)."""
        if self.committed is not None:
            self.committed.finish(turn, record.usage, record.cost_usd, error)
        span = self.span
        attributes: dict[str, Any] = {
            "http.response.status_code": record.status,
            "gateway.model_group": record.model,
            "gateway.provider": record.provider,
            "gateway.outcome": record.outcome,
            "gateway.attempts": len(record.attempts),
            "gateway.request_id": record.request_id,  # the access log's, and X-Request-Id
        }
        if self.session:
            attributes["gen_ai.conversation.id"] = self.session
        if record.cost_usd is not None:
            attributes["gateway.cost_usd"] = record.cost_usd
        if record.key:
            attributes["gateway.key"] = record.key
        attributes.update(_repair_counts(repairs))
        if record.outcome != "ok":
            attributes["error.type"] = record.outcome
        span.set_attributes(attributes)
        if record.status >= 500 or record.outcome in ("stream_error", "upstream_error", "internal_error"):
            span.set_status(self._tracing.error_status)
        span.end()


class AttemptTrace:
    __slots__ = ("_tracing", "span", "_target", "_ended")

    def __init__(self, tracing: Tracing, span: Any, target: Target) -> None:
        self._tracing = tracing
        self.span = span
        self._target = target
        self._ended = False

    def failed(self, error: UpstreamError, repairs: Iterable[Repair]) -> None:
        attributes = {"error.type": error.category.value, **_repair_counts(repairs)}
        if error.status:
            attributes["http.response.status_code"] = error.status
        self.span.set_attributes(attributes)
        self._end(error=True)

    def abandoned(self) -> None:
        """The request went away (the client disconnected) during this attempt."""
        self.span.set_attribute("error.type", "cancelled")
        self._end(error=True)

    def committed(self, repairs: Iterable[Repair]) -> None:
        self.span.set_attributes(_repair_counts(repairs))

    def finish(
        self, turn: AssistantTurn | None, usage: Usage | None, cost: float | None, error: UpstreamError | None
    ) -> None:
        if self._ended:
            return
        tracing = self._tracing
        attributes: dict[str, Any] = {
            "gen_ai.response.model": (turn.model if turn else "") or self._target.model
        }
        if turn is not None:
            attributes["gen_ai.response.finish_reasons"] = (turn.stop_reason.value,)
            if turn.response_id:
                attributes["gen_ai.response.id"] = turn.response_id
            if tracing.capture_content:
                output = {"role": "assistant", "parts": [_part(b) for b in turn.blocks]}
                attributes["gen_ai.output.messages"] = _json(
                    [{**output, "finish_reason": turn.stop_reason.value}]
                )
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            read, write, reasoning = tracing.usage_keys
            attributes[read] = usage.cache_read_tokens
            attributes[write] = usage.cache_write_tokens
            attributes[reasoning] = usage.reasoning_tokens
        if cost is not None:
            attributes["gateway.cost_usd"] = cost
        if error is not None:
            attributes["error.type"] = error.category.value
        elif turn is None:
            attributes["error.type"] = "incomplete"  # the request ended before the answer did
        self.span.set_attributes(attributes)
        self._end(error="error.type" in attributes)

    def _end(self, error: bool) -> None:
        if self._ended:
            return
        self._ended = True
        if error:
            self.span.set_status(self._tracing.error_status)
        self.span.end()


def _repair_counts(repairs: Iterable[Repair]) -> dict[str, int]:
    return {f"gateway.repairs.{kind}": n for kind, n in Counter(r.kind for r in repairs).items()}


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    return [{"role": m.role.value, "parts": [_part(b) for b in m.blocks]} for m in messages]


def _part(block: Any) -> dict[str, Any]:
    """A block in the conventions' message-part shape (gen_ai.input.messages)."""
    t = type(block)
    if t is Text:
        return {"type": "text", "content": block.text}
    if t is Reasoning:
        return {"type": "reasoning", "content": block.text}
    if t is ToolCall:
        return {"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments}
    if t is ToolResult:
        return {"type": "tool_call_response", "id": block.call_id, "response": block.content}
    if t is Image:
        if block.url.startswith("data:"):  # the bytes themselves: their type only
            return {"type": "blob", "modality": "image", "mime_type": block.url[5:].partition(";")[0]}
        return {"type": "uri", "modality": "image", "uri": block.url}
    if t is Document:
        return {"type": "blob", "modality": "document", "mime_type": block.media_type}
    raise TypeError(f"no message part for {t.__name__}")
