"""An assistant turn echoed back with `content: ""` (an empty model reply): the chat ingress takes
it like OpenAI does, and each provider gets what it accepts - the turn as is where it is valid, no
turn (counted `empty_turn_dropped`) where the provider would refuse the request."""

from __future__ import annotations

import aiohttp
import pytest

from gateway.demo import FAMILIES
from tests.e2e.conftest import Stack

# the families that get no empty assistant turn: their APIs refuse one (Anthropic, Gemini, Mistral)
# or are not known to take one
DROPPED = {"anthropic", "gemini", "mistral", "openai_responses", "kimi", "deepseek"}


@pytest.mark.parametrize("group,kind", [(name, kind) for name, kind, _, _ in FAMILIES])
async def test_an_empty_assistant_turn_is_accepted_and_repaired_per_family(stack: Stack, group, kind):
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Are you there?"},
    ]
    async with aiohttp.ClientSession() as http:
        for turn in range(2):  # the empty turn stays in the conversation: every later turn has it
            async with http.post(
                f"{stack.url}/v1/chat/completions", json={"model": group, "messages": messages}
            ) as response:
                body = await response.json()
                assert response.status == 200, body
                repairs = response.headers.get("X-Gateway-Repairs", "")
            assert ("empty_turn_dropped=1" in repairs) is (kind in DROPPED), repairs
            messages += [body["choices"][0]["message"], {"role": "user", "content": f"Turn {turn}."}]

    state = stack.hub.states[kind]
    assert state.rejections == []
    sent = state.requests[-1].body
    if kind == "openai_chat":  # OpenAI takes it: the provider sees what the client sent
        assert {"role": "assistant", "content": ""} in sent["messages"]
