"""bench/answer_path.py works: every provider's recorded stream decodes and every dialect encodes
it, and each figure is measured (never a timing assertion)."""

from __future__ import annotations

from bench import answer_path
from tests.conftest import fixture_path


def test_every_pair_is_measured():
    for name, _ in answer_path.STREAMS.values():
        fixture_path(*name.split("/"))  # skipped (or failed under CI) without the recordings
    table = answer_path.measure(reps=1, rounds=1)
    assert set(table) == set(answer_path.STREAMS)
    for row in table.values():
        assert set(row) == {"decode", *answer_path.DIALECTS}
        assert all(value > 0 for value in row.values())


def test_each_dialect_writes_the_recorded_answer():
    batches = answer_path.decode("openai_chat", answer_path.chunks("openai_chat"))
    for dialect in answer_path.DIALECTS:
        assert b"Holiday" in answer_path.encode(dialect, batches), dialect
