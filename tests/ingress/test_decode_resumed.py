"""The decoders' fold over the decoded messages resumed after the conversation's last turn
(gateway/ingress/chat/decode.py and gateway/ingress/messages/decode.py `_DECODED`): the same
request, or the same refusal, as a decode from the start."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.workloads import agent_messages
from gateway.ingress.chat import decode as chat_decode
from gateway.ingress.chat.codec import CODEC as CHAT
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.messages import decode as messages_decode
from gateway.ingress.messages.codec import CODEC as MESSAGES
from tests.ingress.test_memo import TOOLS, _decode, anthropic_message, chat_message

_SYSTEM = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "developer"]),
        "content": st.sampled_from(["", "Be brief.", "Rules."]),
    }
)
# The strategies the tests draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_OPENINGS = st.lists(_SYSTEM, max_size=2)
_MORE_TURNS = st.integers(0, 6)
_TURNS = st.integers(2, 5)
_CHAT_STEPS = st.sampled_from(["append", "append", "append", "edit", "back"])
_CHAT_MESSAGE = chat_message()
_CHAT_APPENDED = st.lists(_CHAT_MESSAGE | _SYSTEM, min_size=1, max_size=3)


def _raw(messages: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"model": "m", "messages": messages, "tools": TOOLS})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_resumed_decode_is_the_decode_from_the_start(data):
    """Turns that append messages (system ones among them, empty or not: where they go depends on
    what came before), edit one or go back: each decoded through the memo (resumed where a
    turn before left off) as a decode from the start with nothing held decodes it."""
    opening = data.draw(_OPENINGS)
    messages = [*opening, *agent_messages(20 + data.draw(_MORE_TURNS), f"resumed{len(opening)}")]
    memo = DecodeMemo(8 << 20)
    for _ in range(data.draw(_TURNS)):
        step = data.draw(_CHAT_STEPS)
        if step == "append":
            messages = [*messages, *data.draw(_CHAT_APPENDED)]
        elif step == "edit":
            at = data.draw(st.integers(len(opening) + 2, len(messages) - 1))
            messages = [*messages[:at], data.draw(_CHAT_MESSAGE), *messages[at + 1 :]]
        else:
            messages = messages[: data.draw(st.integers(len(opening) + 18, len(messages)))]
        warm = _decode(CHAT, _raw(messages), memo)
        chat_decode._DECODED.clear()
        cold = _decode(CHAT, _raw(messages), None)
        if isinstance(cold, tuple):  # a drawn message the decoder refuses: refused alike
            assert warm == cold
            continue
        assert warm.request == cold.request and warm.ignored_tokens == cold.ignored_tokens


def test_an_agents_next_turns_decode_only_their_new_messages(monkeypatch):
    """The fold resumes (what the decode memo hands back is the same objects turn after turn)."""
    resumed: list[int] = []
    real = chat_decode._DECODED

    class Spy:
        def find(self, *args: Any) -> Any:
            found = real.find(*args)
            resumed.append(found[0])
            return found

        def hold(self, *args: Any) -> None:
            real.hold(*args)

    monkeypatch.setattr(chat_decode, "_DECODED", Spy())
    messages = agent_messages(80, "resumed-agent")
    memo = DecodeMemo(8 << 20)
    for step in range(4):
        messages = [*messages, {"role": "user", "content": f"Step {step}."}]
        warm = _decode(CHAT, _raw(messages), memo)
        held = resumed[-1]
        assert warm.request == _decode(CHAT, _raw(messages), None).request
        assert held == (len(messages) - 1 if step else 0)  # every message but the new one held


_PREFILL = st.sampled_from([{"role": "assistant", "content": ""}, {"role": "assistant", "content": []}])
_MESSAGES_STEPS = st.sampled_from(["append", "append", "prefill", "edit", "back"])
_ANTHROPIC_MESSAGE = anthropic_message()
_MESSAGES_APPENDED = st.lists(_ANTHROPIC_MESSAGE, min_size=1, max_size=3)
_EDITED = _ANTHROPIC_MESSAGE | _PREFILL


def _messages_body(messages: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"model": "m", "max_tokens": 64, "messages": messages})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_resumed_messages_decode_is_the_decode_from_the_start(data):
    """Messages turns that append (an empty assistant message last among them: allowed only
    there, so a turn after it is refused), edit one or go back: decoded through the memo as a
    decode from the start with nothing held decodes (or refuses) them."""
    messages: list[dict[str, Any]] = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} of resumed"} for i in range(20)
    ]
    memo = DecodeMemo(8 << 20)
    for _ in range(data.draw(_TURNS)):
        step = data.draw(_MESSAGES_STEPS)
        if step == "append":
            messages = [*messages, *data.draw(_MESSAGES_APPENDED)]
        elif step == "prefill":
            messages = [*messages, data.draw(_PREFILL)]
        elif step == "edit":
            at = data.draw(st.integers(1, len(messages) - 1))
            messages = [*messages[:at], data.draw(_EDITED), *messages[at + 1 :]]
        else:
            messages = messages[: data.draw(st.integers(17, len(messages)))]
        warm = _decode(MESSAGES, _messages_body(messages), memo)
        messages_decode._DECODED.clear()
        cold = _decode(MESSAGES, _messages_body(messages), None)
        if isinstance(cold, tuple):
            assert warm == cold
            continue
        assert warm.request == cold.request and warm.ignored_tokens == cold.ignored_tokens


def test_a_messages_turn_after_an_empty_last_message_is_refused_though_it_was_held():
    """The last message's emptiness is allowed there only: the fold is held without it."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(20)]
    memo = DecodeMemo(8 << 20)
    for turn in ([*messages, {"role": "assistant", "content": ""}],) * 2:
        assert not isinstance(_decode(MESSAGES, _messages_body(turn), memo), tuple)
    after = [*messages, {"role": "assistant", "content": ""}, {"role": "user", "content": "go on"}]
    refused = _decode(MESSAGES, _messages_body(after), memo)
    assert isinstance(refused, tuple) and refused == _decode(MESSAGES, _messages_body(after), None)
