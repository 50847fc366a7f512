"""Minted tool-call ids (gateway/routing/answer.py `mint_tool_call_id`): `call_` and 24 characters
of [0-9A-Za-z], each as likely as `secrets.choice(_ALPHABET)` picks it, from one read of the OS's
random source mapped by a table (rejection sampling: bytes from 248 up are dropped)."""

from __future__ import annotations

import re
import secrets

from hypothesis import example, given
from hypothesis import strategies as st

from gateway.routing import answer
from gateway.routing.answer import _ALPHABET, mint_tool_call_id

_FORM = re.compile(r"call_[0-9A-Za-z]{24}")


def test_ids_have_the_canonical_form_and_differ():
    ids = {mint_tool_call_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(_FORM.fullmatch(i) for i in ids)


def test_every_character_is_named_by_as_many_kept_bytes():
    # what makes the characters equally likely: each of the 62 is the image of exactly 4 of the
    # 248 kept byte values, and every byte value from 248 up is dropped
    kept = bytes(range(256)).translate(answer._TO_CHAR, answer._DROPPED)
    assert len(kept) == 248 and kept == bytes(range(248)).translate(answer._TO_CHAR)
    assert sorted(set(kept.decode())) == sorted(_ALPHABET)
    assert all(kept.count(c.encode()) == 4 for c in _ALPHABET)
    assert bytes(range(248, 256)).translate(answer._TO_CHAR, answer._DROPPED) == b""


@example([bytes([255]) * 9 + bytes(range(23)), bytes([248]) * 32])  # two draws short
@given(st.lists(st.binary(min_size=answer._DRAWN, max_size=answer._DRAWN), min_size=1, max_size=4))
def test_a_draw_maps_its_kept_bytes_in_order_and_draws_again_when_too_few(draws):
    reads = iter(draws + [bytes(answer._DRAWN)])  # a last draw of zeros always has enough
    calls = []

    def token_bytes(n: int) -> bytes:
        assert n == answer._DRAWN
        calls.append(n)
        return next(reads)

    original = secrets.token_bytes
    secrets.token_bytes = token_bytes  # type: ignore[assignment]
    try:
        minted = mint_tool_call_id()
    finally:
        secrets.token_bytes = original  # type: ignore[assignment]
    # the first draw keeping 24 bytes or more names the id, by its first 24 kept bytes
    kept_each = [[b for b in draw if b < 248] for draw in [*draws, bytes(answer._DRAWN)]]
    enough = next(at for at, kept in enumerate(kept_each) if len(kept) >= 24)
    assert len(calls) == enough + 1
    assert minted == "call_" + "".join(_ALPHABET[b % 62] for b in kept_each[enough][:24])
