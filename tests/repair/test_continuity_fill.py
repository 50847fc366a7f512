from __future__ import annotations

from gateway.providers.deepseek import CAPABILITIES as DEEPSEEK
from gateway.providers.gemini.adapter import CAPABILITIES as GEMINI
from gateway.providers.kimi import CAPABILITIES as KIMI
from gateway.providers.openai_chat import CAPABILITIES as OPENAI_CHAT
from gateway.repair.continuity_fill import current_turn_start, fill_reasoning_content, fill_thought_signatures
from gateway.transcript.model import NATIVE_ID, Reasoning, ToolCall
from gateway.transcript.target import Target
from tests.repair.helpers import assistant, call, kinds, result, tool, user

GEM = Target("gem", "gemini", "gemini-3-pro-preview", "http://x")
KEY, PLACEHOLDER = GEMINI.thought_signature_key, GEMINI.thought_signature_placeholder


def signed(call_id: str, signature: str = "real") -> ToolCall:
    return ToolCall(call_id, "f", "{}", GEM.continuity({KEY: signature}))


def test_the_placeholder_goes_on_the_first_call_of_each_step_of_the_current_turn_only():
    messages = (
        user("old question"),
        assistant(call("old")),
        tool(result("old")),
        assistant("answer"),
        user("new question"),  # the current turn starts after this message
        assistant(call("a"), call("b")),
        tool(result("a"), result("b")),
        assistant("thinking aloud", call("c")),
        tool(result("c")),
    )
    assert current_turn_start(messages) == 5
    out, repairs = fill_thought_signatures(messages, GEM, GEMINI)
    assert out[1] == messages[1], "earlier turns are not validated: left alone"
    assert out[5].blocks[0].meta == GEM.continuity({KEY: PLACEHOLDER})
    assert out[5].blocks[1] == call("b"), "parallel calls: only the first is signed"
    assert out[7].blocks[1].meta == GEM.continuity({KEY: PLACEHOLDER})
    assert kinds(repairs) == ["placeholder_thought_signature"] * 2
    assert fill_thought_signatures(out, GEM, GEMINI) == (out, [])


def test_an_owned_signature_stays_and_an_owned_native_id_is_kept_beside_the_placeholder():
    native = ToolCall("n", "f", "{}", GEM.continuity({NATIVE_ID: "abc"}))
    messages = (user("q"), assistant(signed("a")), tool(result("a")), assistant(native), tool(result("n")))
    out, repairs = fill_thought_signatures(messages, GEM, GEMINI)
    assert out[1] is messages[1]
    assert out[3].blocks[0].meta.data == {NATIVE_ID: "abc", KEY: PLACEHOLDER}
    assert kinds(repairs) == ["placeholder_thought_signature"]


def test_no_placeholder_without_the_capability():
    messages = (user("q"), assistant(call("a")), tool(result("a")))
    assert fill_thought_signatures(messages, GEM, OPENAI_CHAT) == (messages, [])


def test_tool_call_turns_without_own_reasoning_get_empty_reasoning_content():
    target = Target("ds", "deepseek", "deepseek-reasoner", "http://x")
    own = Reasoning("I will call f", target.continuity({}))
    messages = (
        user("q"),
        assistant("let me check", call("a")),
        tool(result("a")),
        assistant(own, call("b")),
        tool(result("b")),
        assistant("done"),
    )
    for caps in (DEEPSEEK, KIMI):
        out, repairs = fill_reasoning_content(messages, target, caps)
        assert out[1] == assistant(Reasoning("", target.continuity({})), "let me check", call("a"))
        assert out[3] is messages[3] and out[5] is messages[5]
        assert kinds(repairs) == ["reasoning_content_filled"]
        assert fill_reasoning_content(out, target, caps) == (out, [])
    assert fill_reasoning_content(messages, target, OPENAI_CHAT) == (messages, [])
