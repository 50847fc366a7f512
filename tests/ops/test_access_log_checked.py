"""An access line whose strings the redactor found clean one by one is not scanned whole
(Redactor.clean_all, gateway/access_log.py): what is written is exactly what the whole scan of
the line gives, whatever the record holds (secrets, fragments, masked echoes, credential shapes,
quotes and escapes in any of its strings), and the whole scan is skipped only for lines it would
leave as they are. (The ids the gateway mints, random hex, are vouched for, not judged: a record's
request id is one, or does not have their shape.)"""

from __future__ import annotations

import io
import logging

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway import access_log
from gateway.access_log import ACCESS_LOGGER, KEYS, _line, access_line, configure_logging, log_access
from gateway.metrics import AttemptOutcome, RequestRecord, new_request_id
from gateway.redaction import CHECKED_BY, REDACTED, Redactor
from gateway.repair.report import REPAIR_KINDS, Repair
from gateway.transcript.model import Usage
from tests.ops import test_redaction_prefilter as prefilter

HEX_SECRET = "0123456789abcdef01"
SECRETS = (*prefilter.SECRETS, HEX_SECRET)
# as in the scans' own test, with a hex secret and what JSON escapes or frames
PIECES = st.sampled_from(
    [*prefilter.PIECE_LIST, HEX_SECRET, "89abcdef", "x-api-key", "\\", "\n", '":', "\u2028", "stub", "ok"]
)
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=6).map("".join)
MINTED = st.builds(new_request_id)
NOT_HEX = TEXT.filter(lambda value: not value or not set(value) <= set("0123456789abcdef"))
TS = "2026-11-27T10:03:27.525+00:00"


# The strategies `records` draws from, built once: a strategy built inside a draw is built and
# validated again at every draw; the same strategies, the same draws.
_USAGES = st.none() | st.builds(Usage, *(st.integers(0, 10**9) for _ in range(5)))
_REQUEST_IDS = MINTED | NOT_HEX
_STATUSES = st.integers(0, 599)
_DURATIONS = st.floats(0, 1e6)
_TTFTS = st.none() | st.floats(0, 1e6)
_ATTEMPTS = st.lists(st.builds(AttemptOutcome, TEXT, TEXT), max_size=3)
_REPAIRS = st.lists(st.tuples(TEXT, st.builds(Repair, st.sampled_from(sorted(REPAIR_KINDS)))), max_size=3)
_IGNORED = st.integers(0, 10**6)
_COSTS = st.none() | st.floats(0, 1e4)
_TRACE_IDS = MINTED | st.just("")


@st.composite
def records(draw: st.DrawFn) -> RequestRecord:
    usage = draw(_USAGES)
    return RequestRecord(
        draw(TEXT),
        request_id=draw(_REQUEST_IDS),
        session=draw(TEXT),
        model=draw(TEXT),
        provider=draw(TEXT),
        outcome=draw(TEXT),
        status=draw(_STATUSES),
        duration=draw(_DURATIONS),
        ttft=draw(_TTFTS),
        upstream_model=draw(TEXT),
        attempts=draw(_ATTEMPTS),
        repairs=draw(_REPAIRS),
        usage=usage,
        ignored_tokens=draw(_IGNORED),
        cost_usd=draw(_COSTS),
        key=draw(TEXT),
        trace_id=draw(_TRACE_IDS),
    )


@pytest.fixture
def captured(restore_logging, monkeypatch):
    """configure_logging as `gateway serve` does, into a buffer; the line's time fixed. Yields
    (the buffer, the redactor, the whole lines it scanned)."""
    monkeypatch.setattr(access_log, "_timestamp", lambda milli=None: TS)
    redactor = Redactor(SECRETS)
    out = io.StringIO()
    configure_logging("info", redactor, out)
    scanned: list[str] = []
    text = Redactor.text

    def counted(self: Redactor, value: str) -> str:
        if value.startswith('{"ts":'):
            scanned.append(value)
        return text(self, value)

    monkeypatch.setattr(Redactor, "text", counted)
    return out, redactor, scanned


def _whole_scan(redactor: Redactor, record: RequestRecord) -> str:
    return redactor.text(orjson.dumps({"ts": TS, **access_line(record)}).decode())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=records())
def test_what_is_written_is_what_the_whole_scan_gives(captured, record):
    out, redactor, _ = captured
    out.seek(0)
    out.truncate()
    log_access(record)
    assert out.getvalue() == _whole_scan(redactor, record) + "\n"


PLAIN = RequestRecord(
    "chat_completions",
    request_id=new_request_id(),
    session="sess_1",
    model="smart",
    provider="gemini",
    upstream_model="gemini-3-pro-preview",
    status=200,
    attempts=[AttemptOutcome("gemini", "ok")],
    repairs=[("gemini", Repair("synthetic_tool_result"))],
    usage=Usage(10, 4, 0, 0, 0),
)
LEAKY = (
    {"model": "m-" + SECRETS[0]},
    {"upstream_model": SECRETS[1][2:12]},
    {"attempts": [AttemptOutcome(SECRETS[2], "ok")]},
    {"key": "key=abc"},
    {"request_id": "r-" + HEX_SECRET},  # not a minted id: judged as any other string
    {"outcome": 'x"y'},
)


def _no_fragment(lines: list[str]) -> None:
    # (a window that is a plain word, "provider", is a JSON key of every line: see Redactor)
    windows = {s[i : i + 8] for s in SECRETS for i in range(len(s) - 7)} - {"provider"}
    assert not any(window in line for line in lines for window in windows)


def test_a_plain_line_is_not_scanned_and_a_secret_in_any_string_is(captured):
    out, _, scanned = captured
    log_access(PLAIN)
    assert not scanned
    for leaky in LEAKY:
        log_access(_with(PLAIN, **leaky))
        assert len(scanned) == 1, leaky
        scanned.clear()
    lines = out.getvalue().splitlines()
    _no_fragment(lines)
    assert lines[4].count(REDACTED) == 1


def test_with_another_handler_too_the_record_carries_the_check(captured):
    """The access logger writing elsewhere as well: each line is a LogRecord through every
    handler; the redacting filter passes a checked one without a scan."""
    out, redactor, scanned = captured
    seen: list[logging.LogRecord] = []
    other = logging.Handler()
    other.emit = seen.append  # type: ignore[method-assign]
    logging.getLogger(ACCESS_LOGGER).addHandler(other)
    log_access(PLAIN)
    assert not scanned and seen[0].__dict__[CHECKED_BY] is redactor
    for leaky in LEAKY:
        log_access(_with(PLAIN, **leaky))
        assert len(scanned) == 1 and CHECKED_BY not in seen[-1].__dict__, leaky
        scanned.clear()
    lines = out.getvalue().splitlines()
    assert lines == [entry.getMessage() for entry in seen]
    _no_fragment(lines)


def _with(record: RequestRecord, **changes) -> RequestRecord:
    fields = {name: getattr(record, name) for name in RequestRecord.__slots__ if name != "ingress"}
    return RequestRecord(record.ingress, **{**fields, **changes})


def test_a_secret_with_a_quote_turns_the_shortcut_off():
    redactor = Redactor(['abc"defghijk'])
    assert not redactor.quote_free
    assert not redactor.clean_all(("smart",))
    assert Redactor(["abcdefghijk"]).clean_all(("smart",))


def test_clean_judges_a_string_as_a_key_is_written():
    redactor = Redactor()
    # '"x-api-key":1' is a header dump to the whole scan: a string so named is never clean
    assert not redactor.clean("x-api-key")
    assert not redactor.clean("a\\b") and not redactor.clean("a\nb") and not redactor.clean('a"b')
    assert redactor.clean("gemini-3-pro-preview") and redactor.clean("é")


def _strings(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value).union(*map(_strings, value.values()))
    if isinstance(value, list):
        return set().union(*map(_strings, value))
    return set()


def test_every_string_of_a_line_is_checked_or_minted():
    """A field added to the line is among the strings checked (or minted: the ids and hash)."""
    record = _with(
        PLAIN,
        session="s",
        model="m",
        provider="p",
        outcome="o",
        upstream_model="u",
        attempts=[AttemptOutcome("a1", "x1"), AttemptOutcome("a2", "x2")],
        repairs=[("p", Repair(sorted(REPAIR_KINDS)[0]))],
        usage=Usage(1, 2, 3, 4, 5),
        cost_usd=0.5,
        key="k",
        key_refusal="r",
        affinity_break="b",
        trace_id=new_request_id(),
    )
    line, strings = _line(record)
    minted = {line["request_id"], line["session"], line["trace_id"]}
    assert _strings({"ts": TS, **line}) - minted - {TS} <= set(KEYS) | set(strings)
