"""`shares_lead` (gateway/transcript/resume.py), which every resuming pass asks and which remembers
the pairs of tuples it found sharing their lead, answers as the identity walk does, whatever pairs
were asked before (equal objects that are not the same ones, lists, the same pair again)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.transcript import resume
from gateway.transcript.resume import shares_lead

# equal values that are different objects: identity, not equality, decides
_POOL = [[i % 3] for i in range(8)]


def _walk(held, given) -> bool:
    return len(held) <= len(given) and all(a is b for a, b in zip(held, given, strict=False))


_sequences = st.lists(st.integers(0, len(_POOL) - 1), max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_sequences, st.booleans()), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=30),
)
def test_shares_lead_answers_as_the_identity_walk_whatever_was_asked_before(sequences, asked) -> None:
    resume._SHARED.clear()
    values = [
        tuple(_POOL[i] for i in indexes) if as_tuple else [_POOL[i] for i in indexes]
        for indexes, as_tuple in sequences
    ]
    # a tuple sharing its lead with another one of them, as the next turn's
    values.append((*values[0], _POOL[0]))
    for a, b in asked:
        held, given_ = values[a % len(values)], values[b % len(values)]
        assert shares_lead(held, given_) == _walk(held, given_)
    assert len(resume._SHARED) <= resume._SHARED.most == 8
