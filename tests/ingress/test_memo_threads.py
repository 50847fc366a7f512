"""The decode memo shared by the event loop's thread and the worker thread of large bodies
(gateway/ingress/split.py `parse_shared`, gateway/offload.py): whichever thread parses a turn, what is
sent upstream is what decoding it without the memo gives, and the event loop never waits for the
worker's hold on the memo."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.ingress.budget import offloads, value_bound
from gateway.ingress.chat.codec import CODEC as CHAT
from gateway.ingress.errors import ClientError
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.messages.codec import CODEC as MESSAGES
from gateway.ingress.split import parse_shared
from gateway.offload import OFFLOAD_VALUES
from gateway.simulators.base import Reply
from gateway.state import GatewayState
from tests.ingress.test_memo import (
    LIMITS,
    SEALER,
    _decode,
    _outbound,
    anthropic_message,
    chat_message,
    sessions,
)
from tests.ops.conftest import running_stack


def _shared(codec: Any, raw: bytes, memo: DecodeMemo, tenant: str, wait: bool) -> Any:
    """What the exchange does in either thread: parsed and decoded there (None: the memo was
    held by the other thread)."""
    try:
        parsed = parse_shared(raw, codec.transcript_field, memo, f"{id(codec)}\0{tenant}", LIMITS, None, wait)
        if parsed is None:
            return None
        body, items = parsed
        inbound = codec.decode(body, {}, SEALER, items)
    except ClientError as exc:
        return ("error", exc.status, str(exc), exc.param)
    return inbound


def _check(codec: Any, turns: list[tuple[str, bytes]], threads: list[bool]) -> None:
    memo = DecodeMemo(1 << 20)
    with ThreadPoolExecutor(max_workers=1) as worker:
        for (tenant, raw), offloaded in zip(turns, threads * len(turns), strict=False):
            cold = _decode(codec, raw, None)
            for _ in range(2):
                if offloaded:
                    warm = worker.submit(_shared, codec, raw, memo, tenant, True).result()
                else:
                    warm = _shared(codec, raw, memo, tenant, False)
                if isinstance(cold, tuple):
                    assert warm == cold
                    continue
                assert warm.request == cold.request and warm.ignored_tokens == cold.ignored_tokens
                assert _outbound(warm) == _outbound(cold)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(chat_message()), st.lists(st.booleans(), min_size=1, max_size=6))
def test_chat_turns_parsed_in_either_thread_send_what_they_send_without_the_memo(turns, threads):
    _check(CHAT, turns, threads)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(anthropic_message()), st.lists(st.booleans(), min_size=1, max_size=6))
def test_messages_turns_parsed_in_either_thread_send_what_they_send_without_the_memo(turns, threads):
    _check(MESSAGES, turns, threads)


def test_the_event_loop_never_waits_for_the_memo_and_the_worker_does():
    memo = DecodeMemo(1 << 20)
    raw = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    with memo.lock:  # the other thread is in it
        assert _shared(CHAT, raw, memo, "", False) is None
        with ThreadPoolExecutor(max_workers=1) as worker:
            waiting = worker.submit(_shared, CHAT, raw, memo, "", True)
            assert not waiting.done()
            memo.lock.release()
            try:
                assert waiting.result(timeout=60).request.messages
            finally:
                memo.lock.acquire()
    assert memo.misses == 1  # the worker's parse, not the loop's


def _agent(steps: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Task."}]
    for step in range(steps):
        call = {
            "id": f"call_{step}",
            "type": "function",
            "function": {"name": "tool_0", "arguments": "{}"},
        }
        history += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{step}", "content": f"result {step}"},
        ]
    return history


async def test_a_large_agent_turn_finds_its_history_in_the_memo_and_sends_what_it_would_without():
    """An agent transcript past OFFLOAD_VALUES is worked on in the worker thread; its next turn
    finds the turn before in the memo there, and the upstream gets the bytes the memo-less
    decode gives (the memo switched off for the same turns)."""
    history = _agent(OFFLOAD_VALUES // 13)  # ~15 JSON values a step
    tools = [{"type": "function", "function": {"name": "tool_0", "parameters": {"type": "object"}}}]
    turns = [history, [*history, *_agent(2)[1:]]]
    sent: dict[int, list[bytes]] = {}
    for memo_mib in (32, 0):

        def adjust(data: dict[str, Any], mib: int = memo_mib) -> None:
            data.setdefault("server", {})["transcript_memo_mib"] = mib

        async with running_stack(adjust) as stack:
            upstream = stack.hub.states["openai_chat"]
            upstream.push(*[Reply(text="ok") for _ in turns])
            for messages in turns:
                body = {"model": "openai-chat", "messages": messages, "tools": tools}
                raw = orjson.dumps(body)
                assert offloads(value_bound(raw, 0, len(raw)), len(raw))
                status, _, answer = await stack.chat(body)
                assert status == 200, answer
            assert stack.app is not None
            memo = stack.app[GatewayState.KEY].memo
            if memo_mib:
                assert memo.hits >= len(history) - 2  # the second turn's history, found
            sent[memo_mib] = [orjson.dumps(r.body) for r in upstream.requests[-len(turns) :]]
    assert sent[32] == sent[0]
