"""The exchange pipeline: size caps, and continuity partitioned by tenant and session."""

from __future__ import annotations

import orjson

from gateway.exchange import Exchange
from gateway.ingress.budget import offloads, value_bound
from gateway.ingress.chat import codec as chat
from gateway.simulators.base import Reply, ToolCallSpec
from gateway.transcript.events import BlockDelta, BlockKind, BlockStart, MessageStart, is_first_content
from tests.ops.conftest import USER, running_stack

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


async def test_a_transcript_beyond_the_caps_is_refused_before_any_work():
    def small(data):
        data["server"].update(max_messages=4, max_tools=1, max_blocks=5)

    async with running_stack(small) as stack:
        many = [{"role": "user", "content": f"m{n}"} for n in range(5)]
        status, _, body = await stack.chat({"model": "openai-chat", "messages": many})
        assert status == 400
        error = orjson.loads(body)["error"]
        assert error["code"] == "too_many_messages" and error["param"] == "messages"
        assert "max_messages" in error["message"]

        two_tools = TOOLS + [{"type": "function", "function": {"name": "other"}}]
        status, _, body = await stack.chat({"model": "openai-chat", "messages": USER, "tools": two_tools})
        assert status == 400 and orjson.loads(body)["error"]["code"] == "too_many_tools"

        parts = [{"type": "text", "text": str(n)} for n in range(6)]
        status, _, body = await stack.chat(
            {"model": "openai-chat", "messages": [{"role": "user", "content": parts}]}
        )
        assert status == 400 and orjson.loads(body)["error"]["code"] == "too_many_blocks"

        assert stack.hub.states["openai_chat"].requests == [], "nothing reached a provider"
        status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER})
        assert status == 200, "within the caps the gateway serves as usual"


async def test_one_tenants_continuity_never_reaches_another_tenants_request():
    """Tenant B replays tenant A's tool call (same id, name and arguments): A's recorded
    reasoning_content must not be sent upstream in B's request, and the same opening messages do
    not put B in A's derived session."""

    def with_auth(data):
        data["auth"] = {"tokens_env": ["TOKEN_A", "TOKEN_B"]}

    env = {"TOKEN_A": "token-of-tenant-a", "TOKEN_B": "token-of-tenant-b"}
    async with running_stack(with_auth, env=env) as stack:
        deepseek = stack.hub.states["deepseek"]
        secret = "tenant A private chain of thought"
        deepseek.push(
            Reply(reasoning=secret, tool_calls=[ToolCallSpec("lookup", {"q": "x"})]),
            Reply(text="done A"),
            Reply(text="done B"),
        )
        a = {"Authorization": "Bearer token-of-tenant-a"}
        b = {"Authorization": "Bearer token-of-tenant-b"}
        ask = {"model": "deepseek", "messages": USER, "tools": TOOLS}
        status, headers_a, body = await stack.chat(ask, a)
        assert status == 200
        message = orjson.loads(body)["choices"][0]["message"]
        call = message["tool_calls"][0]
        stripped = {"role": "assistant", "content": None, "tool_calls": [call]}  # no reasoning echoed
        follow = USER + [stripped, {"role": "tool", "tool_call_id": call["id"], "content": "42"}]

        status, _, _ = await stack.chat({**ask, "messages": follow}, a)
        assert status == 200
        replayed_a = deepseek.requests[-1].body["messages"][1]
        assert replayed_a["reasoning_content"] == secret, "the owner gets its own reasoning back"

        status, headers_b, _ = await stack.chat({**ask, "messages": follow}, b)
        assert status == 200
        replayed_b = deepseek.requests[-1].body["messages"][1]
        assert secret not in orjson.dumps(deepseek.requests[-1].body).decode()
        assert replayed_b.get("reasoning_content") == "", "B gets the empty stub DeepSeek requires"
        assert headers_a["X-Session-Id"] != headers_b["X-Session-Id"], "derived sessions are per tenant"


def test_the_first_content_is_text_or_a_tool_calls_start_streamed_or_whole():
    """One definition (events.is_first_content) for the commit point and the time to first token
    of both paths: an answer that opens with a tool call has its first content at the call."""
    call = BlockStart(0, BlockKind.TOOL_CALL, "call_1", "lookup")
    assert is_first_content(call) and is_first_content(BlockDelta(0, "x"))
    assert not any(
        is_first_content(e) for e in (MessageStart(), BlockStart(0, BlockKind.TEXT), BlockDelta(0, ""))
    )
    exchange = Exchange(None, chat.DIALECT, chat.CODEC, None)  # type: ignore[arg-type]
    exchange.saw(MessageStart())
    assert exchange.ttft is None
    exchange.saw(call)
    first = exchange.ttft
    assert first is not None
    exchange.saw(BlockDelta(0, "{}"))
    assert exchange.ttft == first


async def test_a_large_body_is_worked_on_off_the_event_loop_and_a_small_one_on_it(monkeypatch):
    """Decided once from the body's values (gateway/offload.py): a body of OFFLOAD_VALUES or more is
    parsed, decoded, repaired and encoded in a worker thread, so the event loop keeps serving the
    others; a smaller one takes no thread hop. Which thread each step ran in is recorded."""
    import threading

    from gateway.ingress import admission
    from gateway.ingress import split as parsing
    from gateway.ingress.chat.codec import ChatCodec
    from gateway.offload import OFFLOAD_VALUES
    from gateway.routing import engine as engine_module

    ran: dict[str, set[bool]] = {}

    def recorded(name, function):
        def step(*args, **kwargs):
            ran.setdefault(name, set()).add(threading.current_thread() is threading.main_thread())
            return function(*args, **kwargs)

        return step

    for module in (admission, parsing):  # a body without a transcript's parse, and a transcript's
        # on the loop whole, in the worker thread in pieces
        for name in ("parse_json_body", "parse_json_pieces"):
            monkeypatch.setattr(module, name, recorded("parse", getattr(module, name)))
    monkeypatch.setattr(ChatCodec, "decode", recorded("decode", ChatCodec.decode))
    monkeypatch.setattr(engine_module, "prepare", recorded("repair", engine_module.prepare))
    monkeypatch.setattr(engine_module.Engine, "encode", recorded("encode", engine_module.Engine.encode))

    parts = [{"type": "text", "text": "a"}] * (OFFLOAD_VALUES // 2)
    large = {"model": "openai-chat", "messages": [{"role": "user", "content": parts}]}
    encoded = orjson.dumps(large)
    assert offloads(value_bound(encoded, 0, len(encoded)), len(encoded))
    async with running_stack() as stack:
        upstream = stack.hub.states["openai_chat"]
        upstream.push(Reply(text="large"), Reply(text="small"))
        status, _, body = await stack.chat(large)
        assert status == 200 and orjson.loads(body)["choices"][0]["message"]["content"] == "large"
        sent = upstream.requests[-1].body["messages"][0]["content"]
        assert "".join(p["text"] if isinstance(p, dict) else p for p in sent) == "a" * len(parts)
        assert ran == {"parse": {False}, "decode": {False}, "repair": {False}, "encode": {False}}

        ran.clear()
        status, _, body = await stack.chat({"model": "openai-chat", "messages": USER})
        assert status == 200 and orjson.loads(body)["choices"][0]["message"]["content"] == "small"
        assert ran == {"parse": {True}, "decode": {True}, "repair": {True}, "encode": {True}}


async def test_a_large_count_tokens_request_is_counted_off_the_event_loop(monkeypatch):
    import threading

    from gateway.offload import OFFLOAD_VALUES
    from gateway.routing import count

    on_loop: list[bool] = []

    def estimate(request):
        on_loop.append(threading.current_thread() is threading.main_thread())
        return real(request)

    real = count.estimate_input_tokens
    monkeypatch.setattr(count, "estimate_input_tokens", estimate)
    blocks = [{"type": "text", "text": "a"}] * (OFFLOAD_VALUES // 2)
    async with running_stack() as stack:
        for content in (blocks, "small"):
            body = {"model": "claude", "messages": [{"role": "user", "content": content}]}
            async with stack.http.post(f"{stack.url}/v1/messages/count_tokens", json=body) as resp:
                assert resp.status == 200, await resp.text()
                assert (await resp.json())["input_tokens"] > 0
    assert on_loop == [False, True]
