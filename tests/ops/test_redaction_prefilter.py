"""Redactor.text skips a regex scan when the line lacks the literal every match of it contains:
the result is exactly what running every scan gives, whatever the text (ASCII or not, any case,
secrets, masks and credential shapes mixed in)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway import redaction
from gateway.redaction import REDACTED, Redactor

SECRETS = ("sk-proj-abcdefgh12345678", "team-provider-key-1", "AIzaSyD-0123456789xyz")
REDACTOR = Redactor(SECRETS)
# what a text is made of: secrets, their echoes, credential shapes, and the characters the scans
# turn on (tests/ops/test_access_log_checked.py adds its own)
PIECE_LIST = [
    *SECRETS,
    "sk-proj-****5678",
    "AIza\u2022\u2022\u20229xyz",
    "sk-p...678",
    "abcd\u2026",
    "?key=",
    "&API_KEY=",
    "Bearer ",
    "bearer token",
    "x-api-key: ",
    "X-Goog-Api-Key=",
    "\u212aey=",  # the Kelvin sign matches "k" under IGNORECASE
    "x-ap\u0131-key: ",  # the dotless i matches "i" and does not lowercase to it
    "bearer\u00a0",
    "provider",
    "12345678",
    " ",
    '"',
    "é",
]
PIECES = st.sampled_from(PIECE_LIST)
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=12)), max_size=12).map("".join)


def every_scan(redactor: Redactor, value: str) -> str:
    value = redaction._MASKED.sub(redactor._masked, value)
    value = redactor._fragments(value)
    for pattern in redaction._PATTERNS:
        value = pattern.sub(rf"\1{REDACTED}", value)
    return value


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_skipping_scans_changes_nothing(value):
    assert REDACTOR.text(value) == every_scan(REDACTOR, value)


@given(TEXT)
def test_without_known_secrets_too(value):
    plain = Redactor()
    expected = value
    for pattern in redaction._PATTERNS:
        expected = pattern.sub(rf"\1{REDACTED}", expected)
    assert plain.text(value) == expected


def test_the_non_ascii_case_is_still_caught():
    assert REDACTOR.text("url?\u212aey=abcdef") == f"url?\u212aey={REDACTED}"
    assert REDACTOR.text("X-Ap\u0131-Key: abcdef") == f"X-Ap\u0131-Key: {REDACTED}"
    assert REDACTOR.text("masked: sk-proj-****5678.") == f"masked: {REDACTED}."
