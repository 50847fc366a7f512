"""The Responses and Gemini dialects through the decode memo: the memo keeps a witness per item,
and the reading of `input` / `contents` resumes after the items the conversation's last
turn read (gateway/ingress/responses/items.py and gateway/ingress/gemini/decode.py `_READ`). An
agent's turns, through the memo (first sight, a turn going on from a held body, items found by
their bytes), decode to the same request, the same refusal and the same bytes to every provider
as the body parsed whole and read from its first item with nothing held."""

from __future__ import annotations

import base64
import operator
from types import SimpleNamespace
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.ingress.gemini import decode as gemini_decode
from gateway.ingress.gemini.codec import GENERATE
from gateway.ingress.memo import DecodeMemo
from gateway.ingress.memo_chain import LONG_TRANSCRIPT
from gateway.ingress.responses import items as responses_items
from gateway.ingress.responses.codec import CODEC as RESPONSES
from gateway.ingress.responses.tokens import carrier_token
from gateway.transcript.model import Continuity, Text
from tests.ingress.test_memo import SEALER, _decode, _outbound, _sealed, texts

CALLS = ["call_a", "call_b", "call_c"]
calls = st.sampled_from(CALLS)
_CARRIER = carrier_token(
    [Text("done", Continuity("p-gemini", "p-gemini", "gemini", "model-x", {"thought_signature": "s"}))],
    SEALER,
)
RESPONSES_TOOLS = [
    {"type": "function", "name": f"tool_{i}", "parameters": {"type": "object", "properties": {}}}
    for i in range(2)
]

# The strategies the composites draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_ITEM_KINDS = st.sampled_from(
    ["user", "user", "assistant", "system", "reasoning", "call", "call", "output", "output"]
    + ["custom", "reference", "tools", "bad"]
)
_SYSTEM_ROLES = st.sampled_from(["system", "developer"])
_MESSAGE_IDS = st.sampled_from(["msg_1", "msg_2"])
_TOKENS = st.sampled_from([None, "sealed", "forged", "native", "carrier"])
_REASONING_IDS = st.sampled_from(["rs_1", "rs_2"])
_SEALED_KINDS = st.sampled_from(["anthropic", "gemini"])
_ITEM_NAMES = st.sampled_from(["tool_0", "tool_1", "read"])
_ARGUMENTS = st.sampled_from(['{"q": 1}', "", "not json"])
_OUTPUT_TYPES = st.sampled_from(["function_call_output", "custom_tool_call_output"])
_REFERENCES = st.sampled_from(["msg_1", "rs_1", "msg_kept"])
_ADDED_TOOLS = st.sampled_from(["extra", "tool_0"])
_UNKNOWN_TYPES = st.sampled_from(["computer_call", "no_such_item"])


@st.composite
def responses_item(draw: Any) -> dict[str, Any]:
    kind = draw(_ITEM_KINDS)
    if kind in ("user", "system"):
        role = "user" if kind == "user" else draw(_SYSTEM_ROLES)
        if draw(st.booleans()):
            return {"role": role, "content": draw(texts)}
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": draw(texts)}]}
    if kind == "assistant":
        item: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": draw(texts), "annotations": []}],
        }
        if draw(st.booleans()):
            item["id"] = draw(_MESSAGE_IDS)
        return item
    if kind == "reasoning":
        token = draw(_TOKENS)
        item = {"type": "reasoning", "summary": [{"type": "summary_text", "text": draw(texts)}]}
        item["id"] = draw(_REASONING_IDS)
        if token == "sealed":
            item["encrypted_content"] = _sealed(draw(_SEALED_KINDS))
        elif token == "forged":
            item["encrypted_content"] = "gw1.bm90LWEtdmFsaWQtYmxvYg"
        elif token == "native":
            item["encrypted_content"] = "gAAAAB-openai-own-token"
        elif token == "carrier":
            item["encrypted_content"] = _CARRIER
        return item
    if kind in ("call", "custom"):
        item = {"type": "function_call" if kind == "call" else "custom_tool_call", "call_id": draw(calls)}
        item["name"] = draw(_ITEM_NAMES)
        if draw(st.booleans()):
            item["namespace"] = "fs"
        if kind == "call":
            item["arguments"] = draw(_ARGUMENTS)
        else:
            item["input"] = draw(texts)
        return item
    if kind == "output":
        kind = draw(_OUTPUT_TYPES)
        return {"type": kind, "call_id": draw(calls), "output": draw(texts)}
    if kind == "reference":
        return {"type": "item_reference", "id": draw(_REFERENCES)}
    if kind == "tools":
        name = draw(_ADDED_TOOLS)  # tool_0 again: refused as a duplicate
        return {"type": "additional_tools", "tools": [{"type": "function", "name": name}]}
    return {"type": draw(_UNKNOWN_TYPES)}


_CONTENT_KINDS = st.sampled_from(["user", "model", "model", "response", "response", "bad"])
_CALLED = st.lists(calls, max_size=2, unique=True)
_TOOL_NAMES = st.sampled_from(["tool_0", "tool_1"])
_SIGNATURES = st.sampled_from([None, "raw-signature", "sealed", "forged"])
_RESPONSE_ROLES = st.sampled_from(["user", "function"])
_BAD_ROLES = st.sampled_from(["system", "tool"])


@st.composite
def gemini_content(draw: Any) -> dict[str, Any]:
    kind = draw(_CONTENT_KINDS)
    if kind == "user":
        return {"role": "user", "parts": [{"text": draw(texts)}]}
    if kind == "model":
        parts: list[dict[str, Any]] = []
        if draw(st.booleans()):
            parts.append({"text": draw(texts), "thought": True})
        for call in draw(_CALLED):
            part: dict[str, Any] = {"functionCall": {"name": draw(_TOOL_NAMES), "args": {}}}
            if draw(st.booleans()):
                part["functionCall"]["id"] = f"tool_0__{call}"
            signature = draw(_SIGNATURES)
            if signature == "sealed":
                part["thoughtSignature"] = base64.b64encode(_sealed("anthropic").encode()).decode()
            elif signature == "forged":
                part["thoughtSignature"] = base64.b64encode(b"gw1.forged").decode()
            elif signature is not None:
                part["thoughtSignature"] = signature
            parts.append(part)
        return {"role": "model", "parts": parts or [{"text": draw(texts)}]}
    if kind == "response":
        response: dict[str, Any] = {
            "name": draw(_TOOL_NAMES),
            "response": {"output": "ok"},
        }
        if draw(st.booleans()):
            response["id"] = draw(calls)
        return {
            "role": draw(_RESPONSE_ROLES),
            "parts": [{"functionResponse": response}],
        }
    return {"role": draw(_BAD_ROLES), "parts": [{"text": "x"}]}


def _responses_base(count: int, seed: str) -> list[dict[str, Any]]:
    """An agent's long history (long enough to be held whole by the memo)."""
    items: list[dict[str, Any]] = [{"role": "developer", "content": f"Rules of {seed}."}]
    items.append({"role": "user", "content": f"Task {seed}."})
    for step in range((count - 2) // 3):
        call = f"call_{seed}_{step}"
        reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"step {step}"}]}
        if step == 0:  # an echoed token that does not verify: counted, on every turn after too
            reasoning["encrypted_content"] = "gw1.bm90LWEtdmFsaWQtYmxvYg"
        items.append(reasoning)
        items.append({"type": "function_call", "call_id": call, "name": "tool_0", "arguments": '{"q": 1}'})
        items.append({"type": "function_call_output", "call_id": call, "output": f"result {step} of {seed}"})
    return items


def _gemini_base(count: int, seed: str) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = [{"role": "user", "parts": [{"text": f"Task {seed}."}]}]
    for step in range((count - 1) // 2):
        call = {"name": "tool_0", "args": {"step": step}, "id": f"tool_0__call_{seed}_{step}"}
        part: dict[str, Any] = {"functionCall": call}
        if step == 0:  # an echoed token that does not verify: counted, on every turn after too
            part["thoughtSignature"] = base64.b64encode(b"gw1.forged").decode()
        contents.append({"role": "model", "parts": [part]})
        response = {
            "name": "tool_0",
            "id": f"tool_0__call_{seed}_{step}",
            "response": {"output": f"{seed} {step}"},
        }
        contents.append({"role": "user", "parts": [{"functionResponse": response}]})
    return contents


def _responses_body(items: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"model": "m", "input": items, "tools": RESPONSES_TOOLS, "store": False})


def _gemini_body(contents: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"contents": contents, "systemInstruction": {"parts": [{"text": "Be brief."}]}})


DIALECTS = {
    "responses": (RESPONSES, responses_item(), _responses_base, _responses_body, responses_items),
    "gemini": (GENERATE, gemini_content(), _gemini_base, _gemini_body, gemini_decode),
}
# what each dialect's turn appends
_APPENDED = {dialect: st.lists(drawn[1], min_size=1, max_size=3) for dialect, drawn in DIALECTS.items()}
_TURNS = st.integers(2, 5)
_STEPS = st.sampled_from(["append", "append", "append", "edit", "back"])


def _same(warm: Any, cold: Any) -> None:
    if isinstance(cold, tuple):  # a drawn item the decoder refuses: refused alike
        assert warm == cold
        return
    assert not isinstance(warm, tuple), warm
    assert warm.request == cold.request and warm.ignored_tokens == cold.ignored_tokens
    assert (warm.history, warm.keep, warm.references) == (cold.history, cold.keep, cold.references)
    assert warm.context == cold.context


def _session(data: Any, dialect: str, outbound: bool) -> None:
    codec, drawn, base, body, _ = DIALECTS[dialect]
    long = data.draw(st.booleans())
    items = base(LONG_TRANSCRIPT + 4 if long else 20, f"{dialect}{long}")
    memo = DecodeMemo(8 << 20)
    for _ in range(data.draw(_TURNS)):
        step = data.draw(_STEPS)
        if step == "append":
            items = [*items, *data.draw(_APPENDED[dialect])]
        elif step == "edit":
            at = data.draw(st.integers(2, len(items) - 1))
            items = [*items[:at], data.draw(drawn), *items[at + 1 :]]
        else:
            items = items[: data.draw(st.integers(17, len(items)))]
        raw = body(items)
        warm = _decode(codec, raw, memo)
        cold = _decode(codec, raw, None)  # read from its first item: nothing is held without the memo
        _same(warm, cold)
        if outbound and not isinstance(cold, tuple):
            assert _outbound(warm) == _outbound(cold)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_resumed_responses_read_is_the_read_from_the_first_item(data):
    """Turns that append items (system ones, references, carriers, tools added: what they make
    depends on what came before), edit one or go back."""
    _session(data, "responses", outbound=False)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_resumed_gemini_read_is_the_read_from_the_first_content(data):
    """Turns that append contents (responses pair with the calls seen so far), edit one or go
    back."""
    _session(data, "gemini", outbound=False)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(sorted(DIALECTS)))
def test_resumed_reads_send_the_same_bytes_to_every_provider(data, dialect):
    _session(data, dialect, outbound=True)


def _spy(monkeypatch: Any, module: Any) -> list[int]:
    """How many items each reading of `module` resumed past (its held fold states, watched)."""
    resumed: list[int] = []
    held = module._READ._held

    def find(*args: Any) -> Any:
        found = held.find(*args)
        resumed.append(found[0])
        return found

    monkeypatch.setattr(module._READ, "_held", SimpleNamespace(find=find, hold=held.hold))
    return resumed


def test_an_agents_next_turns_read_only_their_new_items(monkeypatch):
    """Codex's turns (store false: the whole input, appended to) and Gemini CLI's (the contents,
    appended to): after the first, every item but the new ones is resumed past, each turn going
    on from the body held for the last one."""
    for dialect, (codec, _, base, body, module) in DIALECTS.items():
        resumed = _spy(monkeypatch, module)
        items = base(LONG_TRANSCRIPT + 10, f"agent-{dialect}")
        memo = DecodeMemo(8 << 20)
        before: tuple[Any, ...] = ()
        for step in range(5):
            # a user's word, or the model's call and its output (the turn ends with that group open)
            call = f"call_step_{step}"
            if dialect == "responses":
                new = (
                    [{"role": "user", "content": f"Step {step}."}]
                    if step % 2
                    else [
                        {"type": "function_call", "call_id": call, "name": "tool_0", "arguments": "{}"},
                        {"type": "function_call_output", "call_id": call, "output": f"out {step}"},
                    ]
                )
            else:
                response = {"name": "tool_0", "id": call, "response": {"output": f"out {step}"}}
                new = (
                    [{"role": "user", "parts": [{"text": f"Step {step}."}]}]
                    if step % 2
                    else [
                        {
                            "role": "model",
                            "parts": [{"functionCall": {"name": "tool_0", "args": {}, "id": call}}],
                        },
                        {"role": "user", "parts": [{"functionResponse": response}]},
                    ]
                )
            items = [*items, *new]
            warm = _decode(codec, body(items), memo)
            _same(warm, _decode(codec, body(items), None))
            assert resumed[-2] == (len(items) - len(new) if step else 0), dialect
            # the messages of the turn before are the same objects (the open turn's too): the
            # repair passes resume past them (gateway/transcript/resume.py)
            messages = warm.request.messages
            assert all(map(operator.is_, before, messages[: len(before)])), dialect
            before = messages


def test_a_reference_to_an_item_resumed_past_reads_it_as_the_whole_body_has_it():
    """The held state names an earlier item by its place: one the fold resumed past stands
    unparsed in the list (the body went on from the held one), and is read from the body parsed
    again whole."""
    named = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "named", "annotations": []}],
    }
    items = [*_responses_base(LONG_TRANSCRIPT + 4, "reference"), named]
    memo = DecodeMemo(8 << 20)
    for more in ([], [{"role": "user", "content": "go on"}], [{"type": "item_reference", "id": "msg_1"}]):
        items = [*items, *more]
        warm = _decode(RESPONSES, _responses_body(items), memo)
        _same(warm, _decode(RESPONSES, _responses_body(items), None))
    assert warm.request.messages[-1] == warm.request.messages[-3]  # the named turn, read again
