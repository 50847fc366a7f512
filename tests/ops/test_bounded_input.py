"""Client strings and answers of any size stay bounded: a direct address's model name must be a
model name of the provider's family (a 400 naming `model`, nothing sent upstream, a short access
line), and the memory store holds only turns that carry continuity, within `max_bytes`."""

from __future__ import annotations

import logging

import orjson
import pytest

from gateway.access_log import ACCESS_LOGGER, MAX_FIELD_CHARS, access_line
from gateway.metrics import RequestRecord
from gateway.simulators.base import Reply
from tests.ops.conftest import USER, Stack, access_lines, running_stack

TEN_MB = "x" * (10 * 1024 * 1024)


@pytest.mark.parametrize(
    "model",
    [
        "openai-chat/" + TEN_MB,
        "gemini/../../v1/files",  # would be a path inside the upstream URL
        "gemini/gemini-2.5-pro:generateContent?alt=",
        "claude/claude sonnet",
        "deepseek/" + "d" * 65,
        "kimi/kimi\nk2",
        "openai-chat/-leading-dash",
    ],
)
async def test_a_bad_upstream_model_name_is_a_400_naming_model_and_nothing_is_sent(caplog, model):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with running_stack() as stack:
        status, _, body = await stack.chat({"model": model, "messages": USER})
        error = orjson.loads(body)["error"]
        assert status == 400, error
        assert error["param"] == "model" and error["code"] == "invalid_value"
        assert len(error["message"]) < 200
        assert all(not state.requests for state in stack.hub.states.values())
        stack.hub.states["openai_chat"].push(Reply(text="still serving"))  # and a normal request after
        status, _, body = await stack.chat({"model": "openai-chat", "messages": USER})
        assert status == 200, body
    line = access_lines(caplog)[0]
    assert line["status"] == 400 and line["model"] == "unknown" and line["upstream_model"] == ""
    assert len(orjson.dumps(line)) < 1000


@pytest.mark.parametrize(
    "model", ["openai-chat/meta-llama/Llama-3.3-70B-Instruct", "openai-chat/ft:gpt-4.1-mini:acme::9abc"]
)
async def test_names_the_family_uses_pass(stack: Stack, model):
    stack.hub.states["openai_chat"].push(Reply(text="ok"))
    status, _, body = await stack.chat({"model": model, "messages": USER})
    assert status == 200, body
    assert stack.hub.states["openai_chat"].requests[-1].body["model"] == model.partition("/")[2]


def test_every_access_log_field_is_bounded():
    record = RequestRecord(
        "chat_completions", request_id=TEN_MB, model=TEN_MB, provider=TEN_MB, upstream_model=TEN_MB
    )
    line = access_line(record)
    assert all(len(v) <= MAX_FIELD_CHARS for v in line.values() if isinstance(v, str))
    assert len(orjson.dumps(line)) < 5 * MAX_FIELD_CHARS


async def test_the_memory_store_keeps_only_turns_that_carry_continuity():
    async with running_stack() as stack:
        store = stack.state.store.inner
        stack.hub.states["openai_chat"].push(Reply(text="plain text, no continuity to keep"))
        status, _, _ = await stack.chat({"model": "openai-chat", "messages": USER})
        assert status == 200
        await stack.state.recorder.drain()
        assert len(store) == 0
        # the same kind of answer with reasoning that DeepSeek wants back is kept
        stack.hub.states["deepseek"].push(Reply(text="forty-two", reasoning="6*7"))
        status, _, _ = await stack.chat({"model": "deepseek", "messages": USER})
        assert status == 200
        await stack.state.recorder.drain()
        assert len(store) == 1


async def test_the_memory_store_is_bounded_in_bytes():
    def small_store(data):
        data["store"] = {"backend": "memory", "max_bytes": 3 * 1024 * 1024}

    async with running_stack(small_store) as stack:
        store = stack.state.store.inner
        big = "y" * (1024 * 1024)
        for n in range(6):  # six answers of 1 MiB, each with continuity (reasoning)
            stack.hub.states["deepseek"].push(Reply(text=f"{n}{big}", reasoning="r", chunk_size=len(big)))
            status, _, _ = await stack.chat(
                {"model": "deepseek", "messages": [{"role": "user", "content": f"answer {n}"}]}
            )
            assert status == 200
            await stack.state.recorder.drain()
        assert 0 < len(store) < 3 and store.size_bytes <= 3 * 1024 * 1024
