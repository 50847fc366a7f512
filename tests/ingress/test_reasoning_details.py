from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.reasoning_details import assistant_blocks, encode_details
from gateway.transcript.model import Continuity, Reasoning, Text, ToolCall
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"test-secret")


def meta(kind: str, **data) -> Continuity:
    return Continuity("p", "p", kind, "m", data)


def roundtrip(blocks):
    text = "".join(b.text for b in blocks if type(b) is Text)
    calls = [ToolCall(b.id, b.name, b.arguments) for b in blocks if type(b) is ToolCall]
    reasoning = "".join(b.text for b in blocks if type(b) is Reasoning) or None
    return assistant_blocks(text, calls, reasoning, encode_details(blocks, SEALER), SEALER)


def test_anthropic_style_turn_comes_back_in_order_with_its_tokens():
    blocks = (
        Reasoning("plan", meta("anthropic", signature="sig")),
        Reasoning("", meta("anthropic", redacted="blob")),
        Text("Checking."),
        ToolCall("call_1", "f", '{"x":1}'),
        ToolCall("call_2", "f", '{"x":2}'),
    )
    assert roundtrip(blocks) == (blocks, 0)


def test_gemini_signatures_on_calls_and_an_empty_trailing_text_part():
    blocks = (Text("4"), Text("", meta("gemini", thought_signature="ts")))
    assert roundtrip(blocks) == (blocks, 0)
    calls = (
        ToolCall("call_a", "f", "{}", meta("gemini", thought_signature="t1")),
        ToolCall("call_b", "g", "{}"),
    )
    assert roundtrip(calls) == (calls, 0)


def test_unparseable_tokens_are_ignored_and_counted():
    blocks, ignored = assistant_blocks(
        "hi",
        [],
        None,
        [
            {"type": "reasoning.text", "text": "t", "signature": "forged", "index": 0},
            {"type": "reasoning.encrypted", "data": "gw1.!!!", "index": 1},
            {"type": "something.else"},
        ],
        SEALER,
    )
    assert ignored == 3
    assert blocks == (Reasoning("t", None), Text("hi"))


def test_plain_reasoning_content_without_details_is_unowned_reasoning():
    blocks, ignored = assistant_blocks("answer", [], "thoughts", None, SEALER)
    assert blocks == (Reasoning("thoughts", None), Text("answer")) and ignored == 0


_kinds = st.sampled_from(["anthropic", "gemini", "openai_responses", "deepseek"])
_reasoning = st.builds(lambda t, k: Reasoning(t, meta(k, v=t)), st.text(max_size=5), _kinds)


@given(
    st.lists(_reasoning, max_size=3), st.text(max_size=5), st.lists(st.sampled_from(["f", "g"]), max_size=3)
)
def test_reasoning_then_text_then_calls_always_round_trips(reasoning, text, names):
    blocks = (
        tuple(reasoning)
        + ((Text(text),) if text else ())
        + tuple(ToolCall(f"call_{i}", n, "{}") for i, n in enumerate(names))
    )
    assert roundtrip(blocks)[0] == blocks


def test_a_forged_or_foreign_sealed_blob_is_refused():
    meta = Continuity("claude", "claude", "anthropic", "m", {"signature": "real"})
    blob = SEALER.seal(meta)
    assert SEALER.unseal(blob) == meta
    assert Sealer(b"another-deployment").unseal(blob) is None
    forged = Sealer(b"attacker").seal(Continuity("x", "*", "openai_responses", "*", {"summary": 5}))
    assert SEALER.unseal(forged) is None
    tampered = blob[:-4] + ("AAAA" if not blob.endswith("AAAA") else "BBBB")
    assert SEALER.unseal(tampered) is None


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["", "answer"]),
    st.lists(st.sampled_from(["c1", "c2", "c3"]), unique=True, max_size=3),
    st.sampled_from([None, "", "thinking"]),
    st.sampled_from([None, []]),
    st.sampled_from([None, []]),
)
def test_a_message_with_nothing_placed_by_index_orders_its_blocks_as_the_placing_walk_does(
    text, call_ids, reasoning, details, echoed
):
    calls = [ToolCall(call_id, "read", "{}") for call_id in call_ids]
    # an entry of a format nobody understands is only counted: the walk places the rest the same
    walked, ignored = assistant_blocks(text, calls, reasoning, [{"type": "other.format"}], SEALER, echoed)
    assert ignored == 1
    assert assistant_blocks(text, calls, reasoning, details, SEALER, echoed) == (walked, 0)
