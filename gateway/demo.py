"""`gateway demo`: strict provider simulators on loopback, a gateway wired to them, and a scripted
tool conversation driven through the gateway like an OpenAI-SDK agent would, printing each turn.

Needs no keys and no network. The client here is deliberately plain HTTP + SSE parsing so the demo
has no dependency beyond the gateway's own.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from gateway.app import create_app
from gateway.config import config_from_dict
from gateway.providers import FAMILIES as REGISTRY
from gateway.providers import KINDS
from gateway.simulators.base import Reply, SimulatorHub, ToolCallSpec

DEMO_KEY_ENV = "GATEWAY_DEMO_KEY"

# kind -> (provider entry, upstream model, target options): the demo's target of each family
_TARGETS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "anthropic": ("claude", "claude-sonnet-4-5", {"thinking_budget": 2048}),
    "openai_responses": ("openai", "gpt-5.1", {"reasoning_effort": "medium"}),
    "gemini": ("gemini", "gemini-3-pro-preview", {"reasoning_effort": "low"}),
    "openai_chat": ("openai-chat", "gpt-4.1", {}),
    "mistral": ("mistral", "magistral-medium-latest", {}),
    "kimi": ("kimi", "kimi-k2-thinking", {}),
    "deepseek": ("deepseek", "deepseek-reasoner", {}),
}
# (provider entry, kind, upstream model, target options), one per registered family in the order
# above: a family without a demo target fails here, at import, not silently missing from the demo
FAMILIES: tuple[tuple[str, str, str, dict[str, Any]], ...] = tuple(
    (_TARGETS[kind][0], kind, *_TARGETS[kind][1:]) for kind in sorted(KINDS, key=list(_TARGETS).index)
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Local time in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
]

FINAL_TEXT = (
    "Paris is sunny at 21°C and Tokyo is rainy at 17°C, where it is 22:40 local time. "
    "If you are packing for both, bring sunglasses for Paris and an umbrella for Tokyo; "
    "evenings in Tokyo are cooler, so a light jacket will help."
)

TOOL_RESULTS = {
    ("get_weather", "Paris"): '{"city": "Paris", "sky": "sunny", "celsius": 21}',
    ("get_weather", "Tokyo"): '{"city": "Tokyo", "sky": "rain", "celsius": 17}',
    ("get_time", "Tokyo"): '{"city": "Tokyo", "local_time": "22:40"}',
}


def demo_script() -> list[Reply]:
    """The model's side of one tool conversation: parallel calls, a sequential call, an answer."""
    return [
        Reply(
            reasoning="The user wants the weather in two cities; I will query both at once.",
            text="Let me check both cities.",
            tool_calls=[
                ToolCallSpec("get_weather", {"city": "Paris"}),
                ToolCallSpec("get_weather", {"city": "Tokyo"}),
            ],
        ),
        Reply(
            reasoning="Paris is sunny, Tokyo rainy. The local time in Tokyo would help the user plan.",
            tool_calls=[ToolCallSpec("get_time", {"city": "Tokyo"})],
        ),
        Reply(reasoning="I have everything I need to answer.", text=FINAL_TEXT, chunk_size=16),
    ]


def demo_config(hub: SimulatorHub) -> dict[str, Any]:
    providers = {
        name: {"kind": kind, "base_url": hub.base_url(kind), "api_key_env": DEMO_KEY_ENV}
        for name, kind, _, _ in FAMILIES
    }
    models = {
        name: {"strategy": "failover", "targets": [{"provider": name, "model": model, **options}]}
        for name, _, model, options in FAMILIES
    }
    return {"server": {"host": "127.0.0.1", "port": _free_port()}, "providers": providers, "models": models}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class TurnResult:
    provider: str
    attempts: str
    repairs: str
    message: dict[str, Any]
    finish_reason: str
    streamed: bool


@dataclass
class FamilyResult:
    name: str
    kind: str
    turns: list[TurnResult] = field(default_factory=list)
    tokens_verified: int = 0
    rejections: list[str] = field(default_factory=list)
    error: str | None = None


async def _post_chat(client: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> TurnResult:
    async with client.post(
        url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    ) as resp:
        if resp.status != 200:
            raise RuntimeError(f"gateway answered {resp.status}: {(await resp.text())[:500]}")
        info = (
            resp.headers.get("X-Gateway-Provider", "?"),
            resp.headers.get("X-Gateway-Attempts", "?"),
            resp.headers.get("X-Gateway-Repairs", "none"),
        )
        if not body.get("stream"):
            payload = orjson.loads(await resp.read())
            choice = payload["choices"][0]
            message = {k: v for k, v in choice["message"].items() if v is not None}
            return TurnResult(*info, message, choice["finish_reason"], False)
        return TurnResult(*info, *(await _collect_stream(resp)), True)


async def _collect_stream(resp: aiohttp.ClientResponse) -> tuple[dict[str, Any], str]:
    """Accumulate chat.completion.chunk deltas into the assistant message a client keeps."""
    content: list[str] = []
    reasoning: list[str] = []
    details: list[dict[str, Any]] = []
    calls: dict[int, dict[str, Any]] = {}
    finish = ""
    buffer = b""
    async for chunk in resp.content.iter_any():
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            data = frame.removeprefix(b"data: ")
            if data == b"[DONE]":
                continue
            event = orjson.loads(data)
            if "error" in event:
                raise RuntimeError(f"stream ended with an error: {event['error']['message']}")
            for choice in event.get("choices", ()):
                delta = choice.get("delta", {})
                content.append(delta.get("content") or "")
                reasoning.append(delta.get("reasoning_content") or "")
                details.extend(delta.get("reasoning_details") or ())
                for call in delta.get("tool_calls") or ():
                    slot = calls.setdefault(
                        call["index"],
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    slot["id"] = call.get("id") or slot["id"]
                    fn = call.get("function", {})
                    slot["function"]["name"] += fn.get("name") or ""
                    slot["function"]["arguments"] += fn.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    if details:
        message["reasoning_details"] = details
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {k: v for k, v in message.items() if v is not None}, finish


def _describe(turn: TurnResult) -> str:
    message = turn.message
    calls = message.get("tool_calls", [])
    parts = [
        f"served by {turn.provider} (attempts {turn.attempts}), repairs: {turn.repairs}",
        f"reasoning {len(message.get('reasoning_content', ''))} chars",
        f"{len(message.get('reasoning_details', []))} continuity entries",
        f"{len(calls)} tool call(s)"
        + "".join(" " + c["function"]["name"] + c["function"]["arguments"] for c in calls),
    ]
    if message.get("content"):
        parts.append(f"text: {message['content'][:60]!r}")
    parts.append(f"finish={turn.finish_reason}")
    return "; ".join(parts)


async def run_family(
    client: aiohttp.ClientSession, gateway_url: str, hub: SimulatorHub, name: str, kind: str, say: Any
) -> FamilyResult:
    state = hub.states[kind]
    state.push(*demo_script())
    result = FamilyResult(name, kind)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a concise travel assistant."},
        {"role": "user", "content": "What's the weather in Paris and Tokyo right now?"},
    ]
    try:
        for turn_no, stream in enumerate((True, False, True), start=1):
            body = {"model": name, "messages": messages, "tools": TOOLS, "stream": stream}
            if stream:
                body["stream_options"] = {"include_usage": True}
            turn = await _post_chat(client, f"{gateway_url}/v1/chat/completions", body)
            result.turns.append(turn)
            message = turn.message
            calls = message.get("tool_calls", [])
            say(f"  turn {turn_no} ({'stream' if stream else 'json'}): {_describe(turn)}")
            messages.append(message)  # sent back exactly as the gateway returned it
            for call in calls:
                args = orjson.loads(call["function"]["arguments"])
                output = TOOL_RESULTS.get(
                    (call["function"]["name"], args.get("city")), '{"error": "unknown"}'
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
            if not calls:
                break
    except (RuntimeError, aiohttp.ClientError) as exc:
        result.error = str(exc)
        say(f"  FAILED: {exc}")
    result.tokens_verified = state.verified_tokens
    result.rejections = [f"{r.status} {r.message}" for r in state.rejections]
    return result


# The cross-provider story: one conversation visiting every family, through a client that keeps
# only standard OpenAI fields. (provider entry, what its model answers, how many calls get results)
def cross_provider_script() -> list[tuple[str, Reply, int | None]]:
    def weather(*cities: str) -> list[ToolCallSpec]:
        return [ToolCallSpec("get_weather", {"city": c}) for c in cities]

    return [
        (
            "claude",
            Reply(
                reasoning="Two cities: query both.",
                text="Checking Paris and Tokyo.",
                tool_calls=weather("Paris", "Tokyo"),
            ),
            None,
        ),
        (
            "openai",
            Reply(
                reasoning="The user added five more cities; fan out.",
                tool_calls=weather("Lima", "Oslo", "Rome", "Cairo", "Quito"),
            ),
            1,
        ),
        (
            "gemini",
            Reply(
                reasoning="Local time in Tokyo matters for the trip.",
                tool_calls=[ToolCallSpec("get_time", {"city": "Tokyo"})],
            ),
            None,
        ),
        ("openai-chat", Reply(tool_calls=[ToolCallSpec("get_time", {"city": "Paris"})]), None),
        ("mistral", Reply(reasoning="Retry one of the cancelled cities.", tool_calls=weather("Oslo")), None),
        (
            "kimi",
            Reply(reasoning="And the time in Lima.", tool_calls=[ToolCallSpec("get_time", {"city": "Lima"})]),
            None,
        ),
        ("deepseek", Reply(reasoning="One more: Rome again.", tool_calls=weather("Rome")), None),
        (
            "claude",
            Reply(reasoning="Everything is in; write the answer.", text=FINAL_TEXT, chunk_size=16),
            None,
        ),
    ]


def _tool_output(name: str, arguments: str) -> str:
    city = orjson.loads(arguments).get("city", "?")
    return TOOL_RESULTS.get((name, city), f'{{"city": "{city}", "{name}": "ok"}}')


def _standard_fields(message: dict[str, Any]) -> dict[str, Any]:
    """What an agent that knows only standard OpenAI fields keeps of an assistant message."""
    return {k: message[k] for k in ("role", "content", "tool_calls") if k in message}


async def run_cross_provider(
    client: aiohttp.ClientSession, gateway_url: str, hub: SimulatorHub, say: Any
) -> FamilyResult:
    result = FamilyResult("cross-provider", "all")
    before_rejections = sum(len(s.rejections) for s in hub.states.values())
    before_verified = sum(s.verified_tokens for s in hub.states.values())
    script = cross_provider_script()
    for name, reply, _ in script:
        hub.states[dict((n, k) for n, k, _, _ in FAMILIES)[name]].push(reply)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a concise travel assistant."},
        {
            "role": "user",
            "content": "Weather and local time for my trip: Paris, Tokyo, Lima, Oslo, Rome, Cairo, Quito",
        },
    ]
    try:
        for turn_no, (name, _, answered) in enumerate(script, start=1):
            stream = turn_no % 2 == 1
            body = {"model": name, "messages": messages, "tools": TOOLS, "stream": stream}
            turn = await _post_chat(client, f"{gateway_url}/v1/chat/completions", body)
            result.turns.append(turn)
            say(f"  turn {turn_no} ({'stream' if stream else 'json'}): {_describe(turn)}")
            message = _standard_fields(turn.message)  # reasoning_details etc. are dropped here
            messages.append(message)
            calls = message.get("tool_calls", [])
            for call in calls[:answered] if answered is not None else calls:
                output = _tool_output(call["function"]["name"], call["function"]["arguments"])
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
            if answered is not None:
                say(f"    (the client cancelled the fan-out after {answered} of {len(calls)} results)")
    except (RuntimeError, aiohttp.ClientError) as exc:
        result.error = str(exc)
        say(f"  FAILED: {exc}")
    result.tokens_verified = sum(s.verified_tokens for s in hub.states.values()) - before_verified
    result.rejections = [f"{r.status} {r.message}" for s in hub.states.values() for r in s.rejections][
        before_rejections:
    ]
    return result


async def run_demo(verbose: bool = True) -> int:
    say = print if verbose else (lambda *_: None)
    async with SimulatorHub() as hub:
        config = config_from_dict(demo_config(hub), source="<demo>")
        env = {DEMO_KEY_ENV: hub.states["anthropic"].api_key}
        runner = web.AppRunner(
            create_app(config, env), handle_signals=False, access_log=None, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, config.server.host, config.server.port)
        await site.start()
        gateway_url = f"http://{config.server.host}:{config.server.port}"
        hub_url = hub.base_url("anthropic").removesuffix(REGISTRY["anthropic"].simulator_path)
        say(f"simulators on {hub_url}, gateway on {gateway_url}")
        results: list[FamilyResult] = []
        try:
            async with aiohttp.ClientSession() as client:
                say("\npart 1: one family at a time; the client keeps the assistant messages as returned")
                for name, kind, model, _ in FAMILIES:
                    say(f"\n[{kind}] {name} -> {model}: two cities, parallel then sequential tool calls")
                    results.append(await run_family(client, gateway_url, hub, name, kind, say))
                    r = results[-1]
                    say(
                        f"  continuity tokens verified by the {kind} simulator: {r.tokens_verified}; "
                        f"rejections: {len(r.rejections)}"
                    )
                    for rejection in r.rejections:
                        say(f"    rejected: {rejection}")
                say(
                    "\npart 2: one conversation across every family, a cancelled fan-out, and a client"
                    " that strips every non-standard field (continuity comes from the gateway's store)"
                )
                cross = await run_cross_provider(client, gateway_url, hub, say)
                results.append(cross)
                say(f"  continuity tokens verified on this conversation: {cross.tokens_verified}")
                for rejection in cross.rejections:
                    say(f"    rejected: {rejection}")
        finally:
            await runner.cleanup()

    turns = sum(len(r.turns) for r in results)
    calls = sum(len(t.message.get("tool_calls", [])) for r in results for t in r.turns)
    rejections = sum(len(r.rejections) for r in results)
    failures = [r for r in results if r.error]
    print(
        f"\nsummary: {turns} turns on {len(FAMILIES)} provider families, {calls} tool calls, "
        f"{sum(r.tokens_verified for r in results)} continuity tokens verified, "
        f"{len(failures)} failed conversations, {rejections} provider rejections"
    )
    return 0 if not rejections and not failures else 1
