"""A real OTLP/HTTP trace receiver on loopback: what the gateway's exporter sends is decoded with
the OpenTelemetry protobuf definitions (`opentelemetry-proto`), as a collector would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

KINDS = {SpanProto.SPAN_KIND_SERVER: "server", SpanProto.SPAN_KIND_CLIENT: "client"}


def _value(value: AnyValue) -> Any:
    field = value.WhichOneof("value")
    if field == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, field) if field else None


@dataclass
class ReceivedSpan:
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    end: int
    error: bool
    attributes: dict[str, Any]
    resource: dict[str, Any]


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.content_types: set[str] = set()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> OtlpReceiver:
        app = web.Application()
        app.router.add_post("/v1/traces", self._export)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/v1/traces"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _export(self, request: web.Request) -> web.Response:
        self.content_types.add(request.content_type)
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        for resource_spans in message.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    self.spans.append(
                        ReceivedSpan(
                            span.name,
                            KINDS.get(span.kind, str(span.kind)),
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            span.start_time_unix_nano,
                            span.end_time_unix_nano,
                            span.status.code == span.status.STATUS_CODE_ERROR,
                            {a.key: _value(a.value) for a in span.attributes},
                            resource,
                        )
                    )
        body = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    def of_trace(self, trace_id: str) -> list[ReceivedSpan]:
        return sorted((s for s in self.spans if s.trace_id == trace_id), key=lambda s: s.start)
