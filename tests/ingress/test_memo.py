"""The decode memo (gateway/ingress/memo.py): reuse never changes what is sent upstream.

The property: an agent session, turn after turn (each request re-sends the previous one's
messages and adds some), decoded with a memo that has seen the earlier turns and decoded without
one, gives the same canonical request, the same count of ignored tokens, the same error for a bad
request, and the same bytes to every provider family.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import ServerConfig
from gateway.ingress.admission import check_parts
from gateway.ingress.chat.codec import CODEC as CHAT
from gateway.ingress.errors import ClientError, check_depth, parse_json_body
from gateway.ingress.memo import DecodeMemo, Items
from gateway.ingress.memo_size import RSS_FACTOR, bound_size, deep_size, entry_size
from gateway.ingress.messages.codec import CODEC as MESSAGES
from gateway.ingress.slices import item_texts
from gateway.ingress.split import parse_transcript
from gateway.providers import KINDS, get_adapter
from gateway.providers.base import EncodeError
from gateway.repair import prepare
from gateway.transcript.model import Continuity
from gateway.transcript.seal import Sealer
from gateway.transcript.target import Target

SEALER = Sealer(b"memo-test-secret")
DEPTH = 64
TARGETS = [
    Target(
        f"p-{kind}",
        kind,
        "model-x",
        "http://upstream.invalid",
        thinking_budget=1024 if kind == "anthropic" else None,
    )
    for kind in KINDS
]
TOOLS = [
    {
        "type": "function",
        "function": {"name": f"tool_{i}", "parameters": {"type": "object", "properties": {}}},
    }
    for i in range(3)
]
CALL_IDS = ["call_a", "call_b", "toolu_01ABC", "c-9"]


def _sealed(kind: str) -> str:
    return SEALER.seal(Continuity(f"p-{kind}", f"p-{kind}", kind, "model-x", {"signature": "sig-" + kind}))


texts = st.sampled_from(
    ["", " ", "Hello.", "Let me look.", "done\n", "x" * 300, "caf\u00e9 \u2603", "ok \U0001f600 " * 20]
)
ids = st.sampled_from(CALL_IDS)
# The strategies the composites draw from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_CHAT_ROLES = st.sampled_from(["user", "assistant", "assistant", "tool", "system", "developer"])
_TEXT_OR_NONE = st.one_of(st.none(), texts)
_CALLS = st.lists(ids, max_size=2, unique=True)
_TOOL_NAMES = st.sampled_from(["tool_0", "tool_1"])
_TOKENS = st.sampled_from([None, "sealed", "forged"])
_KINDS = st.sampled_from(KINDS)
_ANTHROPIC_ROLES = st.sampled_from(["user", "user", "assistant"])
_ONE_TO_THREE = st.integers(1, 3)
_SIGNATURES = st.sampled_from(["", "raw-anthropic-signature", _sealed("gemini"), "gw1.Zm9yZ2Vk"])


@st.composite
def chat_message(draw: Any) -> dict[str, Any]:
    role = draw(_CHAT_ROLES)
    if role in ("user", "system", "developer"):
        if draw(st.booleans()):
            return {"role": role, "content": draw(texts)}
        part: dict[str, Any] = {"type": "text", "text": draw(texts)}
        if draw(st.booleans()):
            part["cache_control"] = {"type": "ephemeral"}
        return {"role": role, "content": [part]}
    if role == "tool":
        return {"role": "tool", "tool_call_id": draw(ids), "content": draw(texts)}
    message: dict[str, Any] = {"role": "assistant", "content": draw(_TEXT_OR_NONE)}
    calls = draw(_CALLS)
    if calls:
        message["tool_calls"] = [
            {
                "id": call,
                "type": "function",
                "function": {"name": draw(_TOOL_NAMES), "arguments": '{"q": 1}'},
            }
            for call in calls
        ]
    if draw(st.booleans()):
        message["reasoning_content"] = draw(texts)
    token = draw(_TOKENS)
    if token is not None:
        kind = draw(_KINDS)
        blob = _sealed(kind) if token == "sealed" else "gw1.bm90LWEtdmFsaWQtYmxvYg"
        message["reasoning_details"] = [{"type": "reasoning.encrypted", "data": blob, "index": 0}]
    return message


@st.composite
def anthropic_message(draw: Any) -> dict[str, Any]:
    role = draw(_ANTHROPIC_ROLES)
    if role == "user":
        if draw(st.booleans()):
            return {"role": "user", "content": draw(texts)}
        blocks: list[dict[str, Any]] = []
        for _ in range(draw(_ONE_TO_THREE)):
            if draw(st.booleans()):
                blocks.append({"type": "tool_result", "tool_use_id": draw(ids), "content": draw(texts)})
            else:
                blocks.append({"type": "text", "text": draw(texts) or "hi"})
        return {"role": "user", "content": blocks}
    blocks = []
    if draw(st.booleans()):
        signature = draw(_SIGNATURES)
        blocks.append({"type": "thinking", "thinking": draw(texts), "signature": signature})
    if draw(st.booleans()):
        blocks.append({"type": "text", "text": draw(texts) or "ok"})
    for call in draw(_CALLS):
        blocks.append({"type": "tool_use", "id": call, "name": "tool_0", "input": {"q": 1}})
    return {"role": "assistant", "content": blocks or draw(texts)}


def _turns(messages: list[dict[str, Any]], cuts: list[int]) -> list[list[dict[str, Any]]]:
    """The requests of an agent session: growing prefixes of one transcript."""
    ends = sorted({min(max(c, 1), len(messages)) for c in cuts} | {len(messages)})
    return [messages[:end] for end in ends]


LIMITS = ServerConfig(max_json_depth=DEPTH)


def _decode(codec: Any, body: dict[str, Any] | bytes, memo: DecodeMemo | None, tenant: str = "") -> Any:
    """What the exchange does (gateway/ingress/split.py `parse_transcript`): without a memo, the body
    parsed whole; with one, the items it knows found by their bytes and left unparsed."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    items: Items[Any] | None = None
    try:
        if memo is None:
            parsed = parse_json_body(raw, DEPTH)
            check_parts(parsed, LIMITS)
        else:
            parsed, items = parse_transcript(
                raw, codec.transcript_field, memo, f"{id(codec)}\0{tenant}", LIMITS
            )
        inbound = codec.decode(parsed, {}, SEALER, items)
    except ClientError as exc:
        return ("error", exc.status, str(exc), exc.param)
    finally:
        if memo is not None:
            memo.settle()  # the exchange's bookkeeping, once the answer is on its way
    return inbound


def _outbound(inbound: Any) -> list[Any]:
    """What each family would be sent (or the encoder's refusal: a token forged for a test can
    lack what its issuer's encoder needs, and it must be refused alike)."""
    sent: list[Any] = []
    for target in TARGETS:
        adapter = get_adapter(target.kind)
        prepared = prepare(inbound.request, target, adapter.capabilities)
        try:
            http = adapter.encode_request(prepared.request, target, "key")
        except EncodeError as exc:
            sent.append(("refused", str(exc)))
            continue
        sent.append((http.url, dict(http.headers), http.body, prepared.repairs))
    return sent


def _check_session(codec: Any, turns: list[list[dict[str, Any]]], extra: dict[str, Any]) -> None:
    memo = DecodeMemo(1 << 20)
    for messages in turns:
        body = {"model": "m", "messages": messages, "tools": TOOLS, **extra}
        cold = _decode(codec, body, None)
        warm = _decode(codec, body, memo)
        again = _decode(codec, body, memo)  # every item found this time
        if isinstance(cold, tuple):
            assert warm == cold and again == cold
            continue
        for reused in (warm, again):
            assert reused.request == cold.request
            assert reused.ignored_tokens == cold.ignored_tokens
            assert _outbound(reused) == _outbound(cold)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(chat_message(), min_size=1, max_size=12), st.lists(st.integers(1, 12), max_size=4))
def test_chat_reuse_sends_the_same_bytes_to_every_provider(messages, cuts):
    _check_session(CHAT, _turns(messages, cuts), {})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(anthropic_message(), min_size=1, max_size=10), st.lists(st.integers(1, 10), max_size=4))
def test_messages_reuse_sends_the_same_bytes_to_every_provider(messages, cuts):
    _check_session(MESSAGES, _turns(messages, cuts), {"max_tokens": 256})


def _agent_turns(memo: DecodeMemo) -> list[tuple[int, int]]:
    """(hits, misses) of each turn of a 5-turn agent loop decoded through `memo`."""
    history = [{"role": "user", "content": "Task."}]
    seen = []
    for step in range(5):
        history = [
            *history,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{step}",
                        "type": "function",
                        "function": {"name": "tool_0", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call_{step}", "content": f"result {step}"},
        ]
        hits, misses = memo.hits, memo.misses
        assert not isinstance(_decode(CHAT, {"model": "m", "messages": history}, memo), tuple)
        seen.append((memo.hits - hits, memo.misses - misses))
    return seen


def test_a_message_is_decoded_once_and_found_on_every_turn_after():
    # the first turn's opening is only remembered (parsed whole, kept nowhere: a short transcript
    # never seen); the second, which opens the same way, goes on probation; from the third on,
    # the turn before is found (evidence of reuse: it becomes protected) and only the two new
    # messages are decoded
    memo = DecodeMemo(1 << 20)
    assert _agent_turns(memo) == [(0, 3), (0, 5), (5, 2), (7, 2), (9, 2)]
    assert memo.protected == 9 and len(memo) == 11  # the last turn's two new ones: on probation


def test_admitting_at_once_decodes_only_the_new_messages():
    memo = DecodeMemo(1 << 20, admit_after=1)
    assert _agent_turns(memo) == [(0, 3), (3, 2), (5, 2), (7, 2), (9, 2)]
    assert memo.protected == 11


def test_traffic_that_never_repeats_never_pushes_reused_items_out_and_stays_in_budget():
    memo = DecodeMemo(64 << 10)
    reused = [{"role": "user", "content": f"agent history {n}"} for n in range(30)]
    for _ in range(2):  # seen twice: protected
        items = memo.items("s", reused, DEPTH)
        for index in range(len(reused)):
            items.decode(index, lambda index=index: f"decoded {index}")
    assert memo.protected == len(reused)
    hits = memo.hits
    for n in range(5000):
        items = memo.items("s", [{"role": "user", "content": f"one-off {n}"}], DEPTH)
        assert items.decode(0, lambda: "decoded") == "decoded"
        assert memo.size <= memo.max_bytes
    assert memo.hits == hits  # nothing of it was ever found again
    assert memo.protected == len(reused)
    assert memo.items("s", reused, DEPTH).found == [f"decoded {index}" for index in range(len(reused))]


def test_protected_items_beyond_their_share_go_least_recently_used_first():
    memo = DecodeMemo(32 << 10)
    items = [{"role": "user", "content": f"{i:04d}" + "x" * 400} for i in range(200)]
    for item in items:
        for _ in range(2):
            memo.items("s", [item], DEPTH).decode(0, lambda item=item: item["content"][:4])
        assert memo.size <= memo.max_bytes
        assert memo._protected_size <= memo._protected_max
    assert memo.items("s", [items[-1]], DEPTH).found == ["0199"]
    assert memo.items("s", [items[0]], DEPTH).found == [None]  # least recently used: out


def test_a_history_larger_than_the_protected_share_is_still_found_on_the_next_turn():
    memo = DecodeMemo(128 << 10)
    history = [{"role": "user", "content": f"{i:03d} " + "x" * 800} for i in range(30)]
    first = memo.items("s", history, DEPTH)
    for index in range(len(history)):
        first.decode(index, lambda index=index: index)
    assert memo.size > memo._protected_max  # the turn alone is more than the protected share
    again = memo.items("s", [*history, {"role": "user", "content": "next"}], DEPTH)
    assert again.found == [*range(len(history)), None]
    assert memo.protected == len(history) and memo.size <= memo.max_bytes


def test_a_new_long_conversation_pushes_the_least_recently_used_one_out_and_is_found_next_turn():
    memo = DecodeMemo(128 << 10)

    def session(name: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"{name} {i:03d} " + "x" * 800} for i in range(30)]

    for name in ("old", "new"):
        history = session(name)
        first = memo.items("s", history, DEPTH)
        for index in range(len(history)):
            first.decode(index, lambda index=index, name=name: (name, index))
        assert memo.items("s", [*history, {"role": "user", "content": "go on"}], DEPTH).found[:2] == [
            (name, 0),
            (name, 1),
        ]
        assert memo.size <= memo.max_bytes
    assert memo.items("s", session("old"), DEPTH).found == [None] * 30  # out, least recently used


def test_a_turn_of_most_of_the_body_is_accounted_at_least_what_its_items_are():
    from bench.workloads import agent_messages
    from gateway.ingress import memo as memo_module
    from gateway.ingress.budget import value_bound

    # a long first sight waits whole, accounted at least what its turn holds once read in parts
    messages = agent_messages(memo_module._LONG_TRANSCRIPT, "long")
    memo = DecodeMemo(64 << 20)
    raw = orjson.dumps({"model": "m", "messages": messages, "tools": TOOLS})
    body, items = parse_transcript(raw, "messages", memo, "s", LIMITS, value_bound(raw, 0, len(raw)))
    CHAT.decode(body, {}, SEALER, items)
    (sight,) = memo._probation.values()
    texts = item_texts(raw, "messages")
    assert texts is not None and len(sight.records) == len(texts) and None not in sight.records
    entries = sum(entry_size(text) for text in texts)
    # waiting, it holds the body in place of its items' texts
    assert sight.size >= max(entries, entries + len(raw) - sum(map(len, texts)))
    memo._recall(next(iter(memo._seen)))
    (turn,) = memo._probation.values()
    assert turn.size >= sum(entry_size(key[1]) for key, _, _ in turn.entries) >= entries
    for messages in (agent_messages(40, "turn"), [{"role": "user", "content": "caf\u00e9 " * 50}] * 3):
        # a turn read in parts (its opening seen before, its items new), of most of the body
        raw = orjson.dumps({"model": "m", "messages": messages, "tools": TOOLS})
        memo = DecodeMemo(64 << 20)
        opening = orjson.dumps({"model": "m", "messages": messages[:2], "tools": TOOLS})
        parse_transcript(opening, "messages", memo, "s", LIMITS)  # seen, nothing decoded
        body, items = parse_transcript(raw, "messages", memo, "s", LIMITS, value_bound(raw, 0, len(raw)))
        assert items._turn is not None
        CHAT.decode(body, {}, SEALER, items)
        (turn,) = memo._probation.values()
        entries = sum(entry_size(key[1]) for key, _, _ in turn.entries)
        assert turn.size >= entries + len(messages[0]["content"]) > 0


def _bound_violations(memo: DecodeMemo) -> list[tuple[bytes, int, int]]:
    entries = [(key, decoded) for turn in memo._probation.values() for key, decoded, _ in turn.entries]
    entries += [(key, decoded) for key, (decoded, _, _) in memo._index.items()]
    out = []
    for (_, raw), decoded in entries:
        if deep_size(decoded) > bound_size(raw):
            out.append((raw, deep_size(decoded), bound_size(raw)))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(chat_message(), min_size=1, max_size=12), st.lists(anthropic_message(), min_size=1, max_size=10)
)
def test_what_an_item_is_accounted_is_at_least_what_its_decoded_objects_hold(chat, anthropic):
    memo = DecodeMemo(64 << 20, admit_after=1)
    for codec, messages, extra in ((CHAT, chat, {}), (MESSAGES, anthropic, {"max_tokens": 256})):
        _decode(codec, {"model": "m", "messages": messages, "tools": TOOLS, **extra}, memo)
    assert _bound_violations(memo) == []


def test_the_bound_holds_for_agent_transcripts_and_many_small_parts():
    from bench.workloads import agent_messages

    memo = DecodeMemo(64 << 20, admit_after=1)
    parts = [{"type": "text", "text": ""} for _ in range(50)] + [{"type": "text", "text": "x"}]
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}} for i in range(30)
    ]
    messages = [
        *agent_messages(60, "bound"),
        {"role": "user", "content": parts},
        {"role": "assistant", "content": "", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": ""} for i in range(30)),
        {
            "role": "user",
            "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}] * 20,
        },
    ]
    _decode(CHAT, {"model": "m", "messages": messages, "tools": TOOLS}, memo)
    tool_uses = [{"type": "tool_use", "id": f"t{i}", "name": "n", "input": {}} for i in range(30)]
    anthropic = [
        {"role": "user", "content": [{"type": "text", "text": "a"}] * 40},
        {"role": "assistant", "content": tool_uses},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}"} for i in range(30)]},
    ]
    _decode(MESSAGES, {"model": "m", "max_tokens": 5, "messages": anthropic}, memo)
    assert len(memo) > 60
    assert _bound_violations(memo) == []


def test_the_accounting_matches_what_tracemalloc_measures():
    """The entries' accounted size, without the allocator factor, is at least what their objects
    hold, and not far beyond it (a bound, not a walk of every object: gateway/ingress/memo.py)."""
    import gc
    import tracemalloc

    memo = DecodeMemo(64 << 20, admit_after=1)
    bodies = [
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": f"question {n}: " + "words " * (n % 40)},
                {
                    "role": "assistant",
                    "content": f"answer {n}",
                    "tool_calls": [
                        {
                            "id": f"call_{n}",
                            "type": "function",
                            "function": {"name": "tool_0", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": f"call_{n}", "content": "x" * (n % 300)},
            ],
        }
        for n in range(3000)
    ]
    raws = [orjson.dumps(b) for b in bodies]
    for n in range(20):  # the interpreter's own first-use allocations are not the memo's
        _decode(CHAT, {"model": "m", "messages": [{"role": "user", "content": f"warm {n}"}]}, DecodeMemo(0))
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for raw in raws:
            parsed = parse_json_body(raw, DEPTH, "messages")
            CHAT.decode(parsed, {}, SEALER, memo.items("chat\0", parsed["messages"], DEPTH))
        del parsed
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    accounted = memo.size / RSS_FACTOR
    assert len(memo) == 9000
    assert held <= accounted <= 2 * held, (accounted, held)


def test_tenants_and_dialects_do_not_share_entries():
    memo = DecodeMemo(1 << 20, admit_after=1)
    message = {"role": "user", "content": "same bytes"}
    memo.items("chat\0alice", [message], DEPTH).decode(0, lambda: "decoded for alice")
    assert memo.items("chat\0alice", [message], DEPTH).found == ["decoded for alice"]
    assert memo.items("chat\0bob", [message], DEPTH).found == [None]
    assert memo.items("anthropic_messages\0alice", [message], DEPTH).found == [None]


def test_another_tenant_neither_finds_nor_promotes_what_one_tenant_put_on_probation():
    memo = DecodeMemo(1 << 20)
    message = {"role": "user", "content": "same bytes"}
    memo.items("chat\0alice", [message], DEPTH).decode(0, lambda: "decoded for alice")
    assert memo.items("chat\0bob", [message], DEPTH).found == [None]
    assert memo.protected == 0
    assert memo.items("chat\0alice", [message], DEPTH).found == ["decoded for alice"]
    assert memo.protected == 1


def test_a_conversation_kept_for_one_tenant_is_never_found_nor_continued_by_another():
    memo = DecodeMemo(1 << 20)
    history = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Task."}]
    raw = orjson.dumps({"model": "m", "messages": history})
    longer = orjson.dumps({"model": "m", "messages": [*history, {"role": "user", "content": "More."}]})
    for tenant in ("alice", "bob"):
        # first sight: remembered, nothing kept; the second goes on probation
        assert parse_transcript(raw, "messages", memo, f"chat\0{tenant}", LIMITS)[1]._turn is None
        body, items = parse_transcript(raw, "messages", memo, f"chat\0{tenant}", LIMITS)
        for index in range(2):
            items.decode(index, lambda index=index, tenant=tenant: (tenant, index))
    assert parse_transcript(longer, "messages", memo, "chat\0alice", LIMITS)[1].found[:2] == [
        ("alice", 0),
        ("alice", 1),
    ]
    found = parse_transcript(longer, "messages", memo, "chat\0bob", LIMITS)[1].found
    assert found[:2] == [("bob", 0), ("bob", 1)]  # bob's own turn, never alice's
    assert parse_transcript(longer, "messages", memo, "chat\0carol", LIMITS)[1].found == [None] * 3


def test_memory_is_bounded_and_least_recently_used_goes_first():
    memo = DecodeMemo(8192, admit_after=1)
    items = [{"role": "user", "content": f"{i:04d}" + "x" * 500} for i in range(10)]
    for i, item in enumerate(items):
        memo.items("s", [item], DEPTH).decode(0, lambda i=i: i)
        memo.items("s", [items[0]], DEPTH)  # the first stays in use
        assert memo.size <= 8192
    assert memo.items("s", [items[0]], DEPTH).found == [0]
    assert memo.items("s", [items[1]], DEPTH).found == [None]  # evicted
    assert memo.items("s", [items[-1]], DEPTH).found == [9]
    too_big = {"role": "user", "content": "y" * 9000}
    memo.items("s", [too_big], DEPTH).decode(0, lambda: "never kept")
    assert memo.items("s", [too_big], DEPTH).found == [None]


def test_zero_bytes_keeps_nothing():
    memo = DecodeMemo(0)
    message = {"role": "user", "content": "hi"}
    memo.items("s", [message], DEPTH).decode(0, lambda: "decoded")
    assert memo.items("s", [message], DEPTH).found == [None] and len(memo) == 0


def test_a_failed_decode_keeps_nothing():
    memo = DecodeMemo(1 << 20, admit_after=1)
    message = {"role": "user", "content": "hi"}

    def fails() -> str:
        raise ValueError("bad")

    with pytest.raises(ValueError):
        memo.items("s", [message], DEPTH).decode(0, fails)
    assert memo.items("s", [message], DEPTH).found == [None]


def test_new_items_are_depth_checked_and_known_ones_are_not_walked_again():
    memo = DecodeMemo(1 << 20)
    deep: Any = "leaf"
    for _ in range(10):
        deep = [deep]
    item = {"role": "user", "content": deep}
    with pytest.raises(ClientError, match="nesting deeper than 12"):
        memo.items("s", [item], 12)  # the item is at depth 3, its innermost list at 13
    assert memo.items("s", [item], 13).found == [None]
    body = {"model": "m", "messages": [[[[["x"]]]]]}
    check_depth(body, 3, "messages")  # the transcript is the memo's to check
    with pytest.raises(ClientError, match="nesting deeper than 3"):
        check_depth(body, 3)


@pytest.mark.parametrize("codec", [CHAT, MESSAGES], ids=["chat", "messages"])
def test_nesting_in_the_transcript_is_still_refused_through_the_memo(codec):
    deep: Any = []
    for _ in range(80):
        deep = [deep]
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": deep}]}
    refused = _decode(codec, body, DecodeMemo(1 << 20))
    assert refused[:2] == ("error", 400) and "nesting deeper than 64" in refused[2]
    assert refused == _decode(codec, body, None)


def test_a_kept_item_costs_its_length_not_the_encoders_buffer():
    import gc
    import tracemalloc

    memo = DecodeMemo(1 << 20, admit_after=1)
    message = {"role": "tool", "tool_call_id": "call_a", "content": "x" * 5000}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        memo.items("s", [message], DEPTH).decode(0, lambda: "decoded")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert memo.items("s", [message], DEPTH).found == ["decoded"]
    assert kept < 3 * 5000


BROKEN = [
    {"role": "bogus", "content": "x"},
    {"role": "user"},
    {"role": "tool", "content": "no call id"},
    {"role": "assistant", "content": 5},
]


_SESSION_TURNS = st.integers(2, 6)
_SESSION_STEPS = st.sampled_from(["append", "append", "edit", "truncate", "tenant", "broken", "bytes"])
_BROKEN_MESSAGES = st.sampled_from(BROKEN)
_BAD_BYTES = st.sampled_from([b'{"role":"user","content":"\xff"}', b'{"role":"user","content":"a",}'])


@st.composite
def sessions(draw: Any, message: Any) -> list[tuple[str, bytes]]:
    """The requests of agent sessions as the gateway gets them: (tenant, body bytes), turn after
    turn appending, editing an earlier message, truncating, switching tenant, sending a broken
    message or bytes that are not JSON, in compact or spaced-out JSON."""
    messages = draw(st.lists(message, min_size=1, max_size=6))
    tenant = "alice"
    out = []
    for _ in range(draw(_SESSION_TURNS)):
        step = draw(_SESSION_STEPS)
        if step == "append":
            messages = [*messages, *draw(st.lists(message, min_size=1, max_size=3))]
        elif step == "edit":
            at = draw(st.integers(0, len(messages) - 1))
            messages = [*messages[:at], draw(message), *messages[at + 1 :]]
        elif step == "truncate":
            messages = messages[: draw(st.integers(1, len(messages)))]
        elif step == "tenant":
            tenant = "bob" if tenant == "alice" else "alice"
        body = {"model": "m", "max_tokens": 64, "messages": messages, "tools": TOOLS}
        if step == "broken":
            body["messages"] = [*messages, draw(_BROKEN_MESSAGES)]
        raw = orjson.dumps(body)
        if draw(st.booleans()):
            import json

            raw = json.dumps(body, indent=1).encode()
        if step == "bytes":  # a new message with bytes that are not UTF-8, or a trailing comma
            bad = draw(_BAD_BYTES)
            raw = raw[: raw.rindex(b"]")] + b"," + bad + raw[raw.rindex(b"]") :]
        out.append((tenant, raw))
    return out


def _check_turns(codec: Any, turns: list[tuple[str, bytes]]) -> None:
    """Every turn decoded through one memo (seeing each turn twice, as a client retrying would)
    is what decoding it without one gives: the same request, or the same error."""
    memo = DecodeMemo(1 << 20)
    for tenant, raw in turns:
        cold = _decode(codec, raw, None)
        for _ in range(2):
            warm = _decode(codec, raw, memo, tenant)
            if isinstance(cold, tuple):
                assert warm == cold
                continue
            assert warm.request == cold.request and warm.ignored_tokens == cold.ignored_tokens
            assert _outbound(warm) == _outbound(cold)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(chat_message()))
def test_chat_turns_edited_truncated_broken_or_of_another_tenant_decode_as_without_the_memo(turns):
    _check_turns(CHAT, turns)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(anthropic_message()))
def test_messages_turns_edited_truncated_broken_or_of_another_tenant_decode_as_without_the_memo(turns):
    _check_turns(MESSAGES, turns)


@pytest.mark.parametrize("field", ["messages", "model"])
def test_a_body_nested_past_what_msgspec_reads_is_refused_as_when_parsed_whole(field):
    hostile = b'{"' + field.encode() + b'": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    assert _decode(CHAT, hostile, DecodeMemo(1 << 20)) == _decode(CHAT, hostile, None)
    assert _decode(CHAT, hostile, None)[:2] == ("error", 400)


def test_a_known_item_is_neither_parsed_nor_walked_again():
    memo = DecodeMemo(1 << 20)
    history = [{"role": "user", "content": "Task."}, {"role": "assistant", "content": "On it."}]
    raw = orjson.dumps({"model": "m", "messages": history})
    parse_transcript(raw, "messages", memo, "s", LIMITS)  # first sight: remembered, nothing kept
    parse_transcript(raw, "messages", memo, "s", LIMITS)[1].decode(0, lambda: "first")
    body, items = parse_transcript(raw, "messages", memo, "s", LIMITS)
    assert [type(v).__name__ for v in body["messages"]] == ["Known", "dict"]  # the second was never decoded
    assert items.found == ["first", None]
    assert items.whole(body) == orjson.loads(raw)


edits = st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=3)), min_size=1, max_size=3)


def _check_bytes(codec: Any, body: dict[str, Any], edits: list[tuple[int, bytes]]) -> None:
    """Bytes near a valid body (some replaced, removed or inserted): the memo's reading in parts
    accepts and refuses exactly what the whole parse does, with the same error."""
    memo = DecodeMemo(1 << 20)
    raw = orjson.dumps(body)
    for _ in range(2):  # what the memo knows: the valid body's items, on probation at the second sight
        _decode(codec, raw, memo)
    for at, insert in edits:
        at %= len(raw) + 1
        raw = raw[:at] + insert + raw[at + len(insert) // 2 :]
    cold = _decode(codec, raw, None)
    warm = _decode(codec, raw, memo)
    if isinstance(cold, tuple):
        assert warm == cold
    else:
        assert warm.request == cold.request and _outbound(warm) == _outbound(cold)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(chat_message(), min_size=1, max_size=4), edits)
def test_any_chat_bytes_a_client_sends_decode_as_when_parsed_whole(messages, edits):
    _check_bytes(CHAT, {"model": "m", "messages": messages, "tools": TOOLS}, edits)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(anthropic_message(), min_size=1, max_size=4), edits)
def test_any_messages_bytes_a_client_sends_decode_as_when_parsed_whole(messages, edits):
    _check_bytes(MESSAGES, {"model": "m", "max_tokens": 64, "messages": messages}, edits)


@pytest.mark.parametrize("earlier", [b'"\xff"', b"1e400", b"123456789012345678901234567890", b'"m"', b"[1,]"])
def test_a_seen_body_naming_a_key_twice_is_judged_as_when_parsed_whole(earlier):
    # msgspec, which reads a seen body's fields, keeps a repeated key's last value without
    # checking the earlier one; orjson refuses some of those (bytes that are not UTF-8, numbers
    # past a double) and the client must get what the whole parse says either way
    memo = DecodeMemo(1 << 20)
    history = [{"role": "user", "content": "Task."}, {"role": "assistant", "content": "On it."}]
    raw = orjson.dumps({"model": "m", "messages": history, "tools": TOOLS})
    for _ in range(2):  # the opening seen: the next body is read in parts
        _decode(CHAT, raw, memo)
    twice = b'{"model": ' + earlier + b", " + raw[1:]
    cold, warm = _decode(CHAT, twice, None), _decode(CHAT, twice, memo)
    if earlier in (b'"\xff"', b"1e400", b"[1,]"):
        assert cold[:2] == ("error", 400)
    if isinstance(cold, tuple):
        assert warm == cold
    else:
        assert warm.request == cold.request and _outbound(warm) == _outbound(cold)


def test_a_first_seen_opening_is_parsed_whole_and_a_repeated_one_read_in_parts(monkeypatch):
    # admission on evidence of reuse: a request whose opening was never seen costs what it costs
    # without the memo (one whole parse, nothing kept); the same opening seen again (its next turn)
    # is read in parts and its items go on probation; per tenant, and within a bounded table
    from gateway.ingress import memo as memo_module
    from gateway.ingress import split as parsing

    paths: list[str] = []
    split, whole = parsing.parse_split, parsing.parse_json_body

    def spy_split(*args: Any, **kwargs: Any) -> Any:
        paths.append("split")
        return split(*args, **kwargs)

    def spy_whole(*args: Any, **kwargs: Any) -> Any:
        paths.append("whole")
        return whole(*args, **kwargs)

    monkeypatch.setattr(parsing, "parse_split", spy_split)
    monkeypatch.setattr(parsing, "parse_json_body", spy_whole)
    memo = DecodeMemo(1 << 20)
    history = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Task."}]
    first = orjson.dumps({"model": "m", "messages": history, "tools": TOOLS})
    items = parse_transcript(first, "messages", memo, "chat\0alice", LIMITS)[1]
    assert paths == ["whole"] and items._turn is None and items.found == [None, None]
    items.decode(0, lambda: "decoded")
    assert len(memo) == 0 and memo.size == 0  # nothing kept at a short first sight
    longer = orjson.dumps({"model": "m", "messages": [*history, {"role": "assistant", "content": "Ok."}]})
    paths.clear()
    items = parse_transcript(longer, "messages", memo, "chat\0alice", LIMITS)[1]
    assert paths == ["split"] and items._turn is not None  # the same opening: on probation
    assert items.found == [None, None, None]
    paths.clear()
    assert parse_transcript(longer, "messages", memo, "chat\0bob", LIMITS)[1]._turn is None
    assert paths == ["whole"]  # alice's opening is no evidence for bob
    # a long first sight waits on probation whole: its next turn finds what it decoded
    long = [{"role": "user", "content": f"m{n}"} for n in range(memo_module._LONG_TRANSCRIPT)]
    paths.clear()
    items = parse_transcript(orjson.dumps({"messages": long}), "messages", memo, "chat\0alice", LIMITS)[1]
    for index in range(len(long)):
        items.decode(index, lambda index=index: index)
    # bounded once the answer is on its way (`settle`); else by the next request's admission, as here
    assert paths == ["whole"] and len(memo._probation) == 1 and memo._unsized is not None
    more = orjson.dumps({"messages": [*long, {"role": "user", "content": "go on"}]})
    assert parse_transcript(more, "messages", memo, "chat\0alice", LIMITS)[1].found == [
        *range(len(long)),
        None,
    ]
    assert paths == ["whole", "split"]
    for n in range(3 * memo._seen_max):
        one_off = orjson.dumps({"messages": [{"role": "user", "content": f"{n}"}]})
        memo.admit("chat\0alice", one_off, "messages")
    assert len(memo._seen) == memo._seen_max
