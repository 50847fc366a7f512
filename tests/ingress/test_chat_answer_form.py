"""A Chat Completions answer of one plain text (or none) is written from its form
(`completion_json`): byte for byte what the dict built for any turn writes."""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.ingress.chat.encode import completion_dict_json, completion_json
from gateway.transcript.model import AssistantTurn, Continuity, Reasoning, StopReason, Text, ToolCall, Usage
from gateway.transcript.seal import Sealer

SEALER = Sealer(b"k" * 32)
COUNTS = st.integers(min_value=0, max_value=2**40)
USAGES = st.builds(Usage, COUNTS, COUNTS, COUNTS, COUNTS, COUNTS)
META = Continuity(provider="g", scope="g", kind="gemini", model="m", data={"thought_signature": "c2ln"})
PLAIN = st.builds(Text, st.text())
BLOCKS = st.one_of(
    st.just([]),
    st.lists(PLAIN, min_size=1, max_size=1),
    # what takes the dict's way: a refusal, a text with continuity, more than one block
    st.lists(
        st.one_of(
            PLAIN,
            st.builds(Text, st.text(), st.just(META)),
            st.builds(Text, st.text(), refusal=st.just(True)),
            st.builds(Reasoning, st.text()),
            st.builds(ToolCall, st.text(max_size=8), st.text(max_size=8), st.just("{}")),
        ),
        min_size=1,
        max_size=3,
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    blocks=BLOCKS,
    stop=st.sampled_from(list(StopReason)),
    usage=USAGES,
    response_id=st.text(),
    model=st.text(),
    created=st.one_of(st.none(), st.integers(min_value=-(2**40), max_value=2**40)),
)
def test_the_form_writes_what_the_dict_writes(
    blocks: list, stop: StopReason, usage: Usage, response_id: str, model: str, created: int | None
) -> None:
    turn = AssistantTurn(blocks, stop, usage)
    with mock.patch("time.time", return_value=1_700_000_000.9):  # `created` None: now
        assert completion_json(turn, response_id, model, SEALER, created) == completion_dict_json(
            turn, response_id, model, SEALER, created
        )
