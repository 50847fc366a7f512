"""Traces as an OTLP/HTTP collector receives them: a SERVER span per client request continuing the
client's traceparent, a CLIENT span per upstream attempt with the GenAI conventions, across a
failover and a tool loop moved from one provider family to another."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import orjson
from aiohttp import web

from gateway.access_log import session_hash
from gateway.app import create_app
from gateway.config import config_from_dict, describe, load_config
from gateway.demo import DEMO_KEY_ENV
from gateway.simulators.base import Fault, Reply, SimulatorHub, ToolCallSpec
from tests.ops.conftest import PROVIDER_KEY, USER, base_config, running_stack
from tests.tracing.otlp_receiver import OtlpReceiver

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def traced(receiver: OtlpReceiver, **tracing):
    def adjust(data):
        data["tracing"] = {"enabled": True, "endpoint": receiver.url, **tracing}

    return adjust


async def flushed(stack) -> None:
    # the exporter posts from its own thread to the receiver on this loop: never block the loop
    await asyncio.to_thread(stack.state.tracing.force_flush)


async def test_a_failover_is_one_server_span_with_a_client_span_per_attempt(caplog):
    caplog.set_level("INFO", logger="gateway.access")
    async with OtlpReceiver() as receiver, running_stack(traced(receiver)) as stack:
        stack.hub.states["anthropic"].push(Fault(status=529))
        headers = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "X-Session-Id": "conv-1"}
        body = {"model": "smart", "stream": True, "stream_options": {"include_usage": True}, "messages": USER}
        async with stack.http.post(stack.url + "/v1/chat/completions", json=body, headers=headers) as resp:
            assert resp.status == 200
            await resp.read()
        await flushed(stack)

        spans = receiver.of_trace(TRACE_ID)
        assert [s.kind for s in spans] == ["server", "client", "client"]
        server, failed, served = spans
        assert server.parent_id == PARENT_ID, "the client's traceparent is continued"
        assert server.name == "POST /v1/chat/completions"
        assert failed.parent_id == served.parent_id == server.span_id
        assert server.resource["service.name"] == "llm-transcript-gateway"
        assert receiver.content_types == {"application/x-protobuf"}

        assert failed.name == "chat claude-sonnet-4-5"
        assert failed.error and failed.attributes["error.type"] == "overloaded"
        assert failed.attributes["gen_ai.system"] == "anthropic"
        assert failed.attributes["http.response.status_code"] == 529

        assert served.name == "chat gemini-3-pro-preview" and not served.error
        a = served.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.system"] == "gcp.gemini" and "gen_ai.provider.name" not in a
        assert a["gen_ai.request.model"] == "gemini-3-pro-preview"
        assert a["gen_ai.response.model"] == "gemini-3-pro-preview"
        assert a["gateway.model_group"] == "smart" and a["gateway.provider"] == "gemini"
        assert a["gen_ai.request.stream"] is True
        assert a["gen_ai.conversation.id"] == session_hash("conv-1"), "hashed, as in the access log"
        assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        # the semconv 1.36 names by default: the breakdowns under gateway.usage.*
        assert a["gateway.usage.reasoning_tokens"] >= 0 and "gen_ai.usage.cache_read.input_tokens" not in a
        assert a["gateway.cost_usd"] > 0
        assert not any(k.startswith("gen_ai.input") or k.startswith("gen_ai.output") for k in a), (
            "no message content without the opt-in"
        )
        assert served.end <= server.end

        s = server.attributes
        assert s["http.response.status_code"] == 200 and s["gateway.attempts"] == 2
        assert s["gateway.cost_usd"] == a["gateway.cost_usd"]
        assert "error.type" not in s and not server.error
        (line,) = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.access"]
        assert line["trace_id"] == TRACE_ID, "the access log line leads to the trace"


async def test_a_cross_family_tool_loop_with_the_latest_conventions_and_content():
    adjust = traced(receiver := OtlpReceiver(), semconv="latest", capture_content=True)
    async with receiver, running_stack(adjust) as stack:
        stack.hub.states["anthropic"].push(
            Reply(
                reasoning="The user wants weather.",
                tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})],
            )
        )
        messages = [{"role": "user", "content": "Weather in Paris?"}]
        headers = {"X-Session-Id": "loop-1"}
        status, _, raw = await stack.chat({"model": "claude", "tools": TOOLS, "messages": messages}, headers)
        assert status == 200, raw
        message = orjson.loads(raw)["choices"][0]["message"]
        call = message["tool_calls"][0]
        messages += [message, {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]
        status, response_headers, raw = await stack.chat(
            {"model": "mistral", "tools": TOOLS, "messages": messages}, headers
        )
        assert status == 200, raw
        assert "tool_id_projected" in response_headers["X-Gateway-Repairs"]
        await flushed(stack)

        clients = [s for s in receiver.spans if s.kind == "client"]
        assert [s.name for s in clients] == ["chat claude-sonnet-4-5", "chat magistral-medium-latest"]
        claude, mistral = clients
        assert claude.trace_id != mistral.trace_id, "two client requests, two traces"
        assert (
            claude.attributes["gen_ai.conversation.id"]
            == mistral.attributes["gen_ai.conversation.id"]
            == session_hash("loop-1")
        )
        assert claude.attributes["gen_ai.provider.name"] == "anthropic"
        assert claude.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
        assert "gen_ai.system" not in claude.attributes
        assert "gen_ai.usage.cache_creation.input_tokens" in claude.attributes
        assert "gen_ai.usage.reasoning.output_tokens" in claude.attributes

        m = mistral.attributes
        assert m["gen_ai.provider.name"] == "mistral_ai"
        assert m["gateway.repairs.tool_id_projected"] >= 1
        assert m["gateway.repairs.reasoning_dropped"] >= 1
        assert not any(k.startswith("gen_ai.repairs") for k in m)
        sent = orjson.loads(m["gen_ai.input.messages"])
        assert [p["type"] for p in sent[-1]["parts"]] == ["tool_call_response"]
        assert sent[-1]["parts"][0]["response"] == "sunny"
        out = orjson.loads(m["gen_ai.output.messages"])
        assert out[0]["role"] == "assistant" and out[0]["parts"][-1]["type"] == "text"
        claude_out = orjson.loads(claude.attributes["gen_ai.output.messages"])
        assert [p["type"] for p in claude_out[0]["parts"]] == ["reasoning", "tool_call"]
        server = next(s for s in receiver.spans if s.kind == "server" and s.trace_id == mistral.trace_id)
        assert server.attributes["gateway.repairs.tool_id_projected"] >= 1


async def test_a_streamed_answers_span_ends_when_the_stream_does():
    async with OtlpReceiver() as receiver, running_stack(traced(receiver)) as stack:
        reply = Reply(text="A long answer that pauses half way through. " * 4, chunk_size=8)
        stack.hub.states["gemini"].push(
            Fault(after_events=3, mid_stream="stall", stall_seconds=0.3, reply=reply)
        )
        body = {"model": "gemini", "stream": True, "messages": USER}
        async with stack.http.post(stack.url + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 200
            await resp.read()
        await flushed(stack)
        server = next(s for s in receiver.spans if s.kind == "server")
        client = next(s for s in receiver.spans if s.kind == "client")
        # the simulator sleeps 0.3 s after the third event, inside the call: a span that ended at
        # the headers or the first chunk would be shorter (a lower bound only: load lengthens it)
        assert client.end - client.start >= 0.3e9, "open while the stream still ran"
        assert client.error and client.attributes["error.type"] in ("connection", "protocol", "timeout")
        assert server.attributes["error.type"] == "stream_error" and server.error
        assert server.end >= client.end


async def test_a_refused_request_ends_its_span_as_an_error_and_tracing_off_makes_none():
    async with OtlpReceiver() as receiver, running_stack(traced(receiver)) as stack:
        status, _, _ = await stack.chat({"model": "no-such-group", "messages": USER})
        assert status == 404
    # no flush here: the gateway's shutdown exported what was still queued
    (server,) = receiver.spans
    assert re.fullmatch(r"[0-9a-f]{32}", server.attributes["gateway.request_id"])
    assert server.attributes["error.type"] == "client_error"
    assert server.attributes["http.response.status_code"] == 404
    async with running_stack() as stack:
        assert stack.state.tracing is None
        status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER})
        assert status == 200


async def test_the_standard_variables_alone_turn_tracing_on_and_configure_the_exporter(tmp_path, monkeypatch):
    """No [tracing] in the file: load_config sees the endpoint variable and turns tracing on; the
    SDK reads the endpoint and the service name from the environment itself."""
    async with OtlpReceiver() as receiver, SimulatorHub(api_key=PROVIDER_KEY) as hub:
        path = tmp_path / "gateway.toml"
        path.write_text(describe(config_from_dict(base_config(hub))))
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "gateway-under-test")
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        config = load_config(path)
        assert (
            config.tracing.enabled and config.tracing.endpoint is None and config.tracing.semconv == "latest"
        )
        app = create_app(config, {DEMO_KEY_ENV: PROVIDER_KEY})
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, config.server.host, config.server.port).start()
        try:
            async with aiohttp.ClientSession() as http:
                url = f"http://{config.server.host}:{config.server.port}/v1/chat/completions"
                async with http.post(url, json={"model": "deepseek", "messages": USER}) as resp:
                    assert resp.status == 200
        finally:
            await runner.cleanup()  # exports what is queued
        client = next(s for s in receiver.spans if s.kind == "client")
        assert client.resource["service.name"] == "gateway-under-test"
        assert client.attributes["gen_ai.provider.name"] == "deepseek"
        assert client.name == "chat deepseek-reasoner"
