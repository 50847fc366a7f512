from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from gateway.repair.tool_ids import project_tool_ids
from gateway.transcript.model import NATIVE_ID, Continuity, Message, Role, Text, ToolCall, ToolResult
from gateway.transcript.target import Target, ToolIdRule

OPENAI = ToolIdRule(r"^[A-Za-z0-9_.:-]{1,40}$", 40, "prefixed", "call_")
MISTRAL = ToolIdRule(r"^[a-zA-Z0-9]{9}$", 9, "alnum9")
KIMI = ToolIdRule(r"^functions\.[\w-]+:\d+$", 128, "kimi")
ANTHROPIC = ToolIdRule(r"^[a-zA-Z0-9_-]+$", 128, "prefixed", "toolu_")
TARGET = Target("mis", "mistral", "m", "http://x")


def convo(ids_and_names):
    msgs = [Message(Role.USER, (Text("hi"),))]
    for ids, names in ids_and_names:
        msgs.append(
            Message(Role.ASSISTANT, tuple(ToolCall(i, n, "{}") for i, n in zip(ids, names, strict=True)))
        )
        msgs.append(Message(Role.TOOL, tuple(ToolResult(i, "ok") for i in ids)))
    return tuple(msgs)


def pairs(messages):
    calls = [b.id for m in messages for b in m.blocks if type(b) is ToolCall]
    results = [b.call_id for m in messages for b in m.blocks if type(b) is ToolResult]
    return calls, results


def test_mistral_ids_are_nine_alphanumerics_and_results_follow_their_calls():
    messages = convo([(["call_abc", "call_def"], ["f", "g"]), (["toolu_x"], ["f"])])
    out, back, changed = project_tool_ids(messages, TARGET, MISTRAL)
    calls, results = pairs(out)
    assert calls == results and len(set(calls)) == 3
    assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", c) for c in calls)
    assert changed == 3
    assert sorted(back.values()) == ["call_abc", "call_def", "toolu_x"]
    assert project_tool_ids(messages, TARGET, MISTRAL)[0] == out, "deterministic"


def test_kimi_ids_use_the_global_call_index():
    messages = convo([(["a", "b"], ["search", "fetch"]), (["c"], ["search"])])
    out, _, _ = project_tool_ids(messages, TARGET, KIMI)
    assert pairs(out)[0] == ["functions.search:0", "functions.fetch:1", "functions.search:2"]


def test_ids_already_valid_stay_as_they_are_and_native_ids_return_to_their_issuer():
    target = Target("claude", "anthropic", "m", "http://x")
    native = Continuity("claude", "claude", "anthropic", "m", {NATIVE_ID: "toolu_01native"})
    messages = (
        Message(
            Role.ASSISTANT, (ToolCall("call_canon1", "f", "{}", native), ToolCall("call_canon2", "f", "{}"))
        ),
        Message(Role.TOOL, (ToolResult("call_canon1", "r"), ToolResult("call_canon2", "r"))),
    )
    out, back, changed = project_tool_ids(messages, target, ANTHROPIC)
    assert pairs(out) == (["toolu_01native", "call_canon2"], ["toolu_01native", "call_canon2"])
    assert back == {"toolu_01native": "call_canon1", "call_canon2": "call_canon2"}
    assert changed == 0, "an issuer getting its own ids back is not a repair"


def test_too_long_ids_are_shortened_without_collisions():
    long_ids = ["x" * 60 + str(i) for i in range(5)]
    out, _, _ = project_tool_ids(convo([(long_ids, ["f"] * 5)]), TARGET, OPENAI)
    calls, results = pairs(out)
    assert calls == results and len(set(calls)) == 5 and all(len(c) <= 40 for c in calls)


def test_input_is_not_mutated():
    messages = convo([(["call_abc"], ["f"])])
    snapshot = repr(messages)
    project_tool_ids(messages, TARGET, MISTRAL)
    assert repr(messages) == snapshot


@given(
    st.lists(st.text(alphabet="abc_-.:/ 1", min_size=1, max_size=70), min_size=1, max_size=12, unique=True)
)
def test_any_ids_project_to_unique_valid_ids_for_every_rule(ids):
    messages = convo([(ids, ["f"] * len(ids))])
    for rule in (OPENAI, MISTRAL, KIMI, ANTHROPIC):
        out, back, _ = project_tool_ids(messages, TARGET, rule)
        calls, results = pairs(out)
        assert calls == results
        assert len(set(calls)) == len(ids)
        assert all(re.fullmatch(rule.pattern, c) and len(c) <= rule.max_len for c in calls)
        assert [back[c] for c in calls] == ids


def test_kimi_ids_are_positional_even_when_a_stale_native_id_names_a_later_index():
    # compaction shifted the calls: the native id of the first call now names the second's place
    # (this used to search for a free id forever)
    kimi = Target("k", "kimi", "kimi-k2", "http://x")
    stale = kimi.continuity({NATIVE_ID: "functions.f:1"})
    messages = (Message(Role.ASSISTANT, (ToolCall("b", "f", "{}", stale), ToolCall("a", "f", "{}"))),)
    out, back, changed = project_tool_ids(messages, kimi, KIMI)
    assert pairs(out)[0] == ["functions.f:0", "functions.f:1"]
    assert back == {"functions.f:0": "b", "functions.f:1": "a"} and changed == 2


def test_kimi_ids_of_names_outside_its_id_alphabet_still_match_the_format():
    out, _, _ = project_tool_ids(convo([(["x"], ["web.search"])]), TARGET, KIMI)
    assert pairs(out)[0] == ["functions.web_search:0"]


def test_ids_already_in_the_target_format_come_back_as_the_same_object():
    messages = convo([(["call_abc"], ["f"])])
    assert project_tool_ids(messages, TARGET, OPENAI)[0] is messages


def _reference(messages, target, rule):
    """The projection one id at a time, as the pass had it before its inline path for fitting ids
    without a native id: the pass must give the same messages, map and count."""
    from gateway.repair.tool_ids import _derive, _kimi_id
    from gateway.transcript.model import replace

    forward, used, state = {}, set(), {"index": 0, "changed": 0}

    def fits(candidate):
        return (
            len(candidate) <= rule.max_len and re.fullmatch(rule.pattern, candidate) and candidate not in used
        )

    def assign(canonical, name, native):
        if canonical in forward:
            return forward[canonical]
        if rule.style == "kimi":
            pid = _kimi_id(name or "tool", state["index"], rule.max_len)
            state["index"] += 1
            state["changed"] += pid != canonical and pid != native
        elif native and fits(native):
            pid = native
        else:
            salt = 0
            pid = canonical
            while not fits(pid):
                pid = _derive(canonical, rule, salt)
                salt += 1
            state["changed"] += pid != canonical
        forward[canonical] = pid
        used.add(pid)
        return pid

    out = []
    for message in messages:
        blocks = []
        for block in message.blocks:
            if type(block) is ToolCall:
                meta = block.meta
                native = meta.data.get(NATIVE_ID) if target.owns(meta) else None
                block = replace(
                    block, id=assign(block.id, block.name, native if isinstance(native, str) else None)
                )
            elif type(block) is ToolResult:
                block = replace(
                    block, call_id=forward.get(block.call_id) or assign(block.call_id, None, None)
                )
            blocks.append(block)
        out.append(Message(message.role, tuple(blocks)))
    return tuple(out), {p: c for c, p in forward.items()}, state["changed"]


@given(
    st.lists(
        st.tuples(
            st.lists(
                st.sampled_from(["call_a", "call_b", "abcdefghi", "x" * 70, "a b", "functions.f:0", "q"]),
                min_size=1,
                max_size=3,
            ),
            st.sampled_from([None, "own", "foreign"]),
            st.sampled_from(["call_a", "zzzzzzzzz", "bad id", 7]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_the_projection_matches_the_one_id_at_a_time_fold_for_every_rule(steps):
    for rule in (OPENAI, MISTRAL, KIMI, ANTHROPIC):
        messages = [Message(Role.USER, (Text("hi"),))]
        for ids, issuer, native in steps:
            meta = None
            if issuer is not None:
                issued = TARGET if issuer == "own" else Target("o", "openai_chat", "m", "http://x")
                meta = issued.continuity({NATIVE_ID: native})
            messages.append(Message(Role.ASSISTANT, tuple(ToolCall(i, "f", "{}", meta) for i in ids)))
            messages.append(Message(Role.TOOL, tuple(ToolResult(i, "ok") for i in ids)))
        messages = tuple(messages)
        got, back, changed = project_tool_ids(messages, TARGET, rule)
        assert (got, back, changed) == _reference(messages, TARGET, rule)


# every provider's id format, and class runs of each form `class_run` reads (or refuses)
ID_PATTERNS = [
    r"^[A-Za-z0-9_.:-]{1,64}$",
    r"^[a-zA-Z0-9_-]+$",
    r"^functions\.[\w-]+:\d+$",
    r"^[a-zA-Z0-9]{9}$",
    r"^[A-Za-z0-9_.:-]{1,40}$",
    r"^[a-z]{0,3}$",
    r"^[^x]+$",
    r"^[^x\n]{2,5}$",
    "^[^x\n]{2,5}$",  # a line feed itself in the class: read, its ASCII only
    r"^[\w]+$",
]
# ids of those characters and the ones at their edges: a line feed (the joined check's
# separator), non-ASCII, a dot, a colon, brackets
ID_CHARS = st.sampled_from(list("aZ09_-.:x\n\r é[]\\") + ["functions.f:1"])
# most ids of an agent's turn fit: lists of them only, or with others among them
FITTING = st.lists(st.sampled_from("aZ09_-"), min_size=1, max_size=12).map("".join)
ID = st.one_of(FITTING, st.lists(ID_CHARS, max_size=12).map("".join))


@example(r"^[a-zA-Z0-9_-]+$", ["ab", "a\nb"], 64)  # an id holding the separator
@example(r"^[a-zA-Z0-9_-]+$", ["ab", ""], 64)  # an empty id
@example(r"^[a-z]{0,3}$", ["", "ab"], 64)  # one its pattern takes
@example(r"^[A-Za-z0-9_.:-]{1,40}$", ["a" * 41], 64)  # longer than its pattern takes
@example(r"^[a-zA-Z0-9]{9}$", ["a" * 9, "b" * 8], 64)  # shorter
@example(r"^[a-zA-Z0-9]{9}$", ["a" * 9, "b" * 9], 64)
@example(r"^[a-zA-Z0-9_-]+$", ["ab", "é"], 64)  # not ASCII
@example("^[^x\n]{2,5}$", ["éa"], 64)  # not ASCII, taken by its class
@given(
    st.sampled_from(ID_PATTERNS),
    st.one_of(
        st.lists(FITTING, min_size=1, max_size=8, unique=True),
        st.lists(ID, min_size=1, max_size=8, unique=True),
    ),
    st.sampled_from([3, 9, 40, 64, 128]),
)
def test_ids_checked_at_once_fit_exactly_when_each_fits_alone(pattern, ids, max_len):
    from gateway.repair.tool_ids import all_fit

    compiled = re.compile(pattern)
    alone = max(map(len, ids)) <= max_len and all(compiled.fullmatch(i) for i in ids)
    assert all_fit(ids, compiled, max_len) is alone


def test_every_plain_provider_format_is_checked_at_once():
    from gateway.repair.tool_ids import class_run

    assert all(class_run(p) is not None for p in ID_PATTERNS[:2] + ID_PATTERNS[3:6])
    assert class_run(r"^functions\.[\w-]+:\d+$") is None  # Kimi's: matched id by id
    assert class_run(r"^[^x]+$") is None  # its class takes a line feed
    assert class_run("^[^x\n]{2,5}$") is not None
