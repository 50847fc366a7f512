"""A large request on every route that takes one (each dialect's generation, streamed or whole,
and count_tokens): its work in the worker thread (gateway/offload.py) runs with the cyclic
collector paused, the transcript it decoded stays out of the generations a collection walks while
the request lives, and is handed back when it ends. Checked through `gc.callbacks` and
`gc.get_objects()`, never by timing."""

from __future__ import annotations

import gc
import threading
from typing import Any

import orjson
import pytest

from gateway.offload import OFFLOAD_VALUES, Offload
from gateway.transcript.model import Text
from tests.ops.conftest import running_stack

MARK = "offloaded-part"
PARTS = OFFLOAD_VALUES  # one value or more each: the body is offloaded


def _text(kind: str) -> list[dict[str, str]]:
    return [{"type": kind, "text": MARK}] * PARTS


ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (
        "/v1/chat/completions",
        {"model": "openai-chat", "messages": [{"role": "user", "content": _text("text")}]},
    ),
    "chat streamed": (
        "/v1/chat/completions",
        {"model": "openai-chat", "stream": True, "messages": [{"role": "user", "content": _text("text")}]},
    ),
    "messages": (
        "/v1/messages",
        {"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": _text("text")}]},
    ),
    "responses": (
        "/v1/responses",
        {"model": "openai", "input": [{"role": "user", "content": _text("input_text")}]},
    ),
    "gemini": (
        "/v1beta/models/gemini:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": MARK}] * PARTS}]},
    ),
    "messages count_tokens": (
        "/v1/messages/count_tokens",
        {"model": "claude", "messages": [{"role": "user", "content": _text("text")}]},
    ),
    "gemini countTokens": (
        "/v1beta/models/gemini:countTokens",
        {"contents": [{"role": "user", "parts": [{"text": MARK}] * PARTS}]},
    ),
}


def _request_shaped(o: object) -> bool:
    """A value a request made of the body's parts: its decoded blocks (untracked Structs since
    they became msgspec Structs, gateway/transcript/model.py), the tuples holding them (tracked
    from creation until a collection looks at them), the parsed body's part lists."""
    t = type(o)
    if t is Text:
        return o.text == MARK  # type: ignore[attr-defined]
    if t is tuple:
        return bool(o) and type(o[0]) is Text and o[0].text == MARK  # type: ignore[index]
    if t is list:
        return bool(o) and type(o[0]) is dict and o[0].get("text") == MARK  # type: ignore[index]
    return False


def _walked_parts() -> int:
    """How many values shaped as the request's are among what the collector's generations hold
    (this module's ROUTES hold some too: while a request's work is frozen, so is everything)."""
    return sum(1 for o in gc.get_objects() if _request_shaped(o))


def _on_loop(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[bool]:
    """Whether each call of `module.name` ran in the event loop's thread, in order."""
    threads: list[bool] = []
    function = getattr(module, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        return function(*args, **kwargs)

    monkeypatch.setattr(module, name, recorded)
    return threads


@pytest.mark.parametrize("route", list(ROUTES))
async def test_a_large_requests_work_is_never_walked_by_the_collector_while_it_lives(route, monkeypatch):
    path, body = ROUTES[route]
    collected: list[str] = []  # the thread of every collection meanwhile

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected.append(threading.current_thread().name)

    walked: list[int] = []  # after each step of the request's work
    run = Offload.run

    async def step(self: Offload, *args: Any, **kwargs: Any) -> Any:
        result = await run(self, *args, **kwargs)
        walked.append(_walked_parts())
        return result

    monkeypatch.setattr(Offload, "run", step)
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    before = _walked_parts()
    # the count sees what a request makes of the body when it is not kept out of sight
    probe = (tuple(Text(MARK) for _ in range(2)), [{"text": MARK}])
    assert _walked_parts() == before + 2
    del probe
    async with running_stack() as stack:
        gc.set_threshold(100, 10, 10)  # without the pause, collections would run inside each job
        gc.callbacks.append(record)
        try:
            async with stack.http.post(stack.url + path, data=orjson.dumps(body)) as resp:
                answer = await resp.read()
                assert resp.status == 200, answer
        finally:
            gc.callbacks.remove(record)
            gc.set_threshold(*threshold)
        assert len(walked) >= 3, "parsed, decoded, and at least one more step in the worker thread"
        assert not [name for name in collected if name.startswith("gateway-offload")]
        assert walked == [0] * len(walked), "the decoded request stayed out of the collector's sight"
        assert gc.get_freeze_count() == frozen, "handed back to the collector when the request ended"
        assert gc.isenabled()


async def test_a_large_responses_answer_is_kept_by_the_worker_thread(monkeypatch):
    """The kept conversation's encoding is linear in the request's blocks (~76 ms on the event
    loop for 200,000): a large request's is made in the worker thread, and so is a short request's
    that continues it; a small one's on the loop."""
    from gateway.continuity import chain

    threads = _on_loop(monkeypatch, chain, "encode_link")
    path, body = ROUTES["responses"]
    async with running_stack() as stack:
        for request in (body, {"model": "openai", "input": "small"}):
            async with stack.http.post(stack.url + path, data=orjson.dumps(request)) as resp:
                assert resp.status == 200, await resp.read()
                kept = (await resp.json())["id"]
            async with stack.http.post(
                stack.url + path,
                data=orjson.dumps({"model": "openai", "input": "on", "previous_response_id": kept}),
            ) as resp:
                assert resp.status == 200, await resp.read()
    # the large one and its continuation (a short body continuing a long conversation), then the
    # small one and its continuation
    assert threads == [False, False, True, True]


async def test_a_body_of_many_bytes_and_few_values_is_parsed_off_the_event_loop(monkeypatch):
    """Its parse and encode are C calls linear in its bytes (31 MB: 32 + 12 ms): in the worker
    thread the event loop waits for one of them at a time, on the loop for all in a row."""
    from gateway.ingress import split
    from gateway.offload import OFFLOAD_BYTES

    # a transcript's body is parsed by the memo-aware parse, in the worker thread with the memo
    # (in pieces there: gateway/ingress/pieces.py)
    parsed_on_loop = _on_loop(monkeypatch, split, "parse_json_pieces")
    body = {
        "model": "claude",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "a" * OFFLOAD_BYTES}],
    }
    async with running_stack() as stack:
        async with stack.http.post(stack.url + "/v1/messages", data=orjson.dumps(body)) as resp:
            assert resp.status == 200, await resp.read()
    assert parsed_on_loop == [False]


async def test_a_long_kept_record_read_from_the_store_is_decoded_in_the_worker_thread(monkeypatch):
    """Continuing a large answer this process no longer has decoded (another worker kept it, a
    restart, an eviction): its record is decoded off the event loop (0.4-0.8 s for 190,000
    blocks), and the rest of the request worked on there too."""
    from gateway.continuity import chain

    threads = _on_loop(monkeypatch, chain, "decode_link")
    path, body = ROUTES["responses"]
    small = {"model": "openai", "input": "small"}
    async with running_stack() as stack:
        kept = []
        for request in (body, small):
            async with stack.http.post(stack.url + path, data=orjson.dumps(request)) as resp:
                assert resp.status == 200, await resp.read()
                kept.append((await resp.json())["id"])
        history = stack.state.history
        for answer in kept:
            history.cache = chain.LinkCache(chain.LINK_CACHE_BYTES)  # read from the store again
            continued = {"model": "openai", "input": "on", "previous_response_id": answer}
            async with stack.http.post(stack.url + path, data=orjson.dumps(continued)) as resp:
                assert resp.status == 200, await resp.read()
    assert threads == [False, True]
