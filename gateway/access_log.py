"""The access log: one JSON object per line for every client request, on the "gateway.access"
logger, and the process's logging setup (levels, redaction, formats).

A line says who asked for what and what happened: request id, hashed session key, model group,
the providers tried with each attempt's outcome, repairs by kind, status, durations and token
usage. It holds only config names, counts and hashes - never message content, headers or keys.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from gateway.bounded_cache import BoundedCache
from gateway.metrics import RequestRecord
from gateway.redaction import CHECKED_BY, RedactingFilter, Redactor

ACCESS_LOGGER = "gateway.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

_access = logging.getLogger(ACCESS_LOGGER)


# sessions whose pseudonym is kept (every turn of a session logs it)
_session_hashes: BoundedCache[str, str] = BoundedCache(4096)


def session_hash(session: str) -> str:
    """A stable pseudonym for a session key: lines of one conversation can be grouped, but a
    client-chosen X-Session-Id (possibly naming a user) is not written out."""
    if not session:
        return ""
    found = _session_hashes.get(session)
    if found is None:
        found = _session_hashes.keep(session, hashlib.sha256(session.encode()).hexdigest()[:16])
    return found


# No field of a line is longer: a line stays one short line whatever a client sent (the direct
# address's model name is validated first; this holds for every field, today's and tomorrow's).
MAX_FIELD_CHARS = 256


def _bounded(value: str) -> str:
    return value if len(value) <= MAX_FIELD_CHARS else value[: MAX_FIELD_CHARS - 3] + "..."


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def access_line(record: RequestRecord) -> dict[str, Any]:
    """The access-log fields of a finished request (without the timestamp)."""
    return _line(record)[0]


# every key a line may have (`_line`, and log_access's "ts")
KEYS = (
    *("ts", "request_id", "ingress", "session", "model", "provider", "upstream_model", "status"),
    *("outcome", "attempts", "tried", "repairs", "duration_ms", "ttft_ms", "usage", "cost_usd"),
    *("ignored_tokens", "key", "trace_id", "input", "output", "cache_read", "cache_write", "reasoning"),
)


def _line(record: RequestRecord) -> tuple[dict[str, Any], tuple[str, ...]]:
    """`access_line`, and every string value in it but those the gateway mints (the request id,
    the session's hash, the trace id): what the redactor must find clean (`log_access`)."""
    usage = record.usage
    model, provider = _bounded(record.model), _bounded(record.provider)
    upstream = _bounded(record.upstream_model)
    tried = [{"provider": _bounded(a.provider), "outcome": a.outcome} for a in record.attempts]
    repairs = {}
    if record.repairs:
        repairs = dict(sorted(Counter(repair.kind for _, repair in record.repairs).items()))
    line = {
        "request_id": _bounded(record.request_id),
        "ingress": record.ingress,
        "session": session_hash(record.session),
        "model": model,
        "provider": provider,
        "upstream_model": upstream,
        "status": record.status,
        "outcome": record.outcome,
        "attempts": len(record.attempts),
        "tried": tried,
        "repairs": repairs,
        "duration_ms": _ms(record.duration),
        "ttft_ms": _ms(record.ttft),
        "usage": None
        if usage is None
        else {
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "cache_read": usage.cache_read_tokens,
            "cache_write": usage.cache_write_tokens,
            "reasoning": usage.reasoning_tokens,
        },
        "cost_usd": record.cost_usd,
        "ignored_tokens": record.ignored_tokens,
        **({"key": record.key} if record.key else {}),
        **({"trace_id": record.trace_id} if record.trace_id else {}),
    }
    strings = (record.ingress, model, provider, upstream, record.outcome, record.key, *repairs)
    for attempt in tried:
        strings += (attempt["provider"], attempt["outcome"])
    return line, strings


_HEX = "0123456789abcdef"  # what is left of a text of these digits once they are stripped: ""
# the redactor the access log's handlers filter with (`configure_logging`): a line whose every
# string it found clean is marked so, and not scanned whole again
_checker: Redactor | None = None
_handler: _LineHandler | None = None  # and the handler it installed for the access log


_second = -1
_second_text = ""
_milli = -1  # the millisecond `_milli_text` was written for
_milli_text = ""


def _timestamp(milli: int | None = None) -> str:
    """The time now (or `milli`, ms since the epoch) as `datetime.now(UTC).isoformat(timespec=
    "milliseconds")` writes it, the date and time of day formatted once per second, the whole
    text once per millisecond (the requests accounted for together mostly share one)."""
    global _second, _second_text, _milli, _milli_text
    if milli is None:
        milli = time.time_ns() // 1_000_000
    if milli == _milli:
        return _milli_text
    second, rest = divmod(milli, 1000)
    if second != _second:
        _second_text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = second
    _milli, _milli_text = milli, f"{_second_text}.{rest:03d}+00:00"
    return _milli_text


# distinct shapes kept (`_shape`): past 4,096, they are worked out anew
_shapes: BoundedCache[tuple[Any, ...], tuple[str, str, str, bool]] = BoundedCache(4096)


def _figure(value: float | None) -> str:
    """A duration in ms (`_ms`) as orjson writes it: a float of magnitude 1e-4 to 1e16 (or 0) is
    its shortest round-trip digits in plain notation, there as in `repr` (a line is written for
    every request; one orjson call per line and its text split apart cost more than the rest)."""
    if value is None:
        return "null"
    if type(value) is float and (1e-4 <= abs(value) < 1e16 or value == 0):
        return repr(value)
    return orjson.dumps(value).decode()


def _duration(seconds: float | None) -> str:
    """`_figure(_ms(seconds))` in one formatting: `round(ms, 1)` is the double nearest the decimal
    `format(ms, ".1f")` writes (CPython makes both with the same correctly rounded conversion), and
    below 1e14 that decimal has at most 15 significant digits, so it is that double's shortest
    round-trip text too, which `repr` and orjson write. Two of a line's figures: `round` and
    `repr` cost ~0.6 us each."""
    if type(seconds) is float:
        ms = seconds * 1000
        if -1e14 < ms < 1e14:
            return f"{ms:.1f}"
    return _figure(_ms(seconds))


def _count(value: int) -> str:
    """A count as orjson writes it (an int: its decimal digits)."""
    return str(value) if type(value) is int else orjson.dumps(value).decode()


# the fields of a line between the session and the figures, in `_line`'s order
_MIDDLE = ("model", "provider", "upstream_model", "status", "outcome", "attempts", "tried", "repairs")


def _shape(record: RequestRecord) -> tuple[str, str, str, bool]:
    """What a line holds that repeats from request to request (config names, status, outcomes,
    the attempts tried, the repairs by kind, the key), as JSON text cut from the object `_line`
    makes: the fields before the session's value (`"ingress":...,"session":"`), those after it up
    to the duration's value, and the key's field; and whether the redactor found every string
    of the line but the minted ids clean. Worked out once per distinct set of them (for the
    redactor `configure_logging` installed)."""
    attempts = [(a.provider, a.outcome) for a in record.attempts]
    kinds = tuple([repair.kind for _, repair in record.repairs]) if record.repairs else ()
    key = (record.ingress, record.model, record.provider, record.upstream_model, record.status)
    key += (record.outcome, record.key, *attempts, kinds)  # (the kinds' tuple ends the attempts' pairs)
    shape = _shapes.get(key)
    if shape is None:
        fields, strings = _line(record)
        checker = _checker
        clean = checker is not None and checker.clean_all(KEYS) and checker.clean_all(strings)
        head = orjson.dumps({"ingress": fields["ingress"], "session": ""}).decode()[1:-2]
        middle = orjson.dumps({name: fields[name] for name in _MIDDLE}).decode()[1:-1]
        tail = orjson.dumps({"key": record.key}).decode()[:-1].replace("{", ",", 1) if record.key else ""
        shape = _shapes.keep(key, (head, f'{middle},"duration_ms":', tail, clean))
    return shape


def log_access(record: RequestRecord, ended_ms: int | None = None) -> None:
    """`ended_ms`: the line's time (ms since the epoch), when not now: the request's end."""
    if not _access.isEnabledFor(logging.INFO):
        return
    head, middle, tail, clean = _shape(record)
    request_id, session, trace_id = _bounded(record.request_id), session_hash(record.session), record.trace_id
    # the values the gateway mints (the time; random ids and a hash, hex digits) carry nothing of
    # any secret, numbers are counts and durations, and every other string (config names,
    # outcomes) is found clean once: the redacting filter need not scan the whole line (about
    # 10 us of the ~20 a line cost)
    checked = clean and not f"{request_id}{session}{trace_id}".strip(_HEX)
    if checked:
        # the text orjson makes of `_line`'s object with "ts" first: strings that need no escape
        # (hex digits, the time) written in, the numbers as orjson writes them (`_duration`,
        # `_figure`, `_count`)
        usage = record.usage
        duration, ttft, cost = _duration(record.duration), _duration(record.ttft), record.cost_usd
        cost = "null" if cost is None else orjson.dumps(cost).decode()  # (its exponents are orjson's)
        ignored = _count(record.ignored_tokens)
        if usage is None:
            used = "null"
        else:
            a, b, c = usage.input_tokens, usage.output_tokens, usage.cache_read_tokens
            d, e = usage.cache_write_tokens, usage.reasoning_tokens
            if not type(a) is type(b) is type(c) is type(d) is type(e) is int:  # (as `_count` writes them)
                a, b, c, d, e = _count(a), _count(b), _count(c), _count(d), _count(e)
            used = f'{{"input":{a},"output":{b},"cache_read":{c},"cache_write":{d},"reasoning":{e}}}'
        traced = f',"trace_id":"{trace_id}"' if trace_id else ""
        text = (
            f'{{"ts":"{_timestamp(ended_ms)}","request_id":"{request_id}",{head}{session}",{middle}{duration},'
            f'"ttft_ms":{ttft},"usage":{used},"cost_usd":{cost},"ignored_tokens":{ignored}{tail}{traced}}}'
        )
        handler = _handler
        if handler is not None and handler.sole_output(_access):
            handler.write_line(text)  # what the record below would write, without making it
            return
    else:
        text = orjson.dumps({"ts": _timestamp(ended_ms), **_line(record)[0]}).decode()
    # `Logger.info` without its caller lookup (a walk of the stack, ~6 us a line, for a file and
    # line number no access-log format prints): the same record through the same filters and
    # handlers
    entry = _access.makeRecord(ACCESS_LOGGER, logging.INFO, __file__, 0, text, None, None)
    if checked:
        entry.__dict__[CHECKED_BY] = _checker
    _access.handle(entry)


class lines_held:  # noqa: N801  (used as a function: `with lines_held():`)
    """Access-log lines written within reach the stream as they are, and are flushed once at the
    end (one write to the file for the requests accounted for together:
    `exchange._account_pending`) instead of once each. (A class, not a generator: it is entered
    on every batch of bookkeeping, and a generator's context manager costs several times more.)"""

    __slots__ = ("_handler",)

    def __enter__(self) -> None:
        handler = _handler
        if handler is None or handler not in _access.handlers:  # not (or no longer) writing the lines
            self._handler = None
            return
        handler.held += 1
        self._handler = handler

    def __exit__(self, *exc: object) -> None:
        handler = self._handler
        if handler is not None:
            handler.held -= 1
            if not handler.held:
                handler.flush_held()


class _LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The access log's handler: each record's message is its whole line (what its "%(message)s"
    formatter writes), written and flushed without the formatter's per-record work; within
    `lines_held`, kept and written in one piece at its end, then flushed: one write to the
    stream for the batch, whatever its buffering (stderr is line-buffered: written line by line,
    each line would reach the file in a system call of its own)."""

    held = 0  # `lines_held` scopes open: lines are written when the last one ends

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self._pending: list[str] = []  # lines held (with their terminators), in order

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage() + self.terminator
            if self.held:
                self._pending.append(text)
                return
            stream = self.stream
            stream.write(text)
            stream.flush()
        except RecursionError:  # as logging.StreamHandler
            raise
        except Exception:
            self.handleError(record)

    def sole_output(self, logger: logging.Logger) -> bool:
        """This handler, as `configure_logging` set it up (its one filter, the redacting one),
        is all `logger` writes to: a checked line needs no LogRecord to get there."""
        handlers = logger.handlers
        return (
            len(handlers) == 1
            and handlers[0] is self
            and not logger.filters
            and len(self.filters) == 1
            and self.level <= logging.INFO
        )

    def write_line(self, line: str) -> None:
        """`line`, which the redacting filter would pass unchanged, written as `emit` writes a
        record whose message it is."""
        with self.lock:  # type: ignore[union-attr]  # (made by Handler.__init__)
            if self.held:
                self._pending.append(line + self.terminator)
                return
            try:
                stream = self.stream
                stream.write(line + self.terminator)
                stream.flush()
            except RecursionError:
                raise
            except Exception:
                entry = _access.makeRecord(ACCESS_LOGGER, logging.INFO, __file__, 0, line, None, None)
                self.handleError(entry)

    def flush_held(self) -> None:
        """The lines held within `lines_held`, written in one piece and flushed (a failure
        reported as a line's would be)."""
        with self.lock:  # type: ignore[union-attr]
            pending = self._pending
            text = "".join(pending)
            pending.clear()
            try:
                stream = self.stream
                if text:
                    stream.write(text)
                stream.flush()
            except RecursionError:
                raise
            except Exception:
                entry = _access.makeRecord(ACCESS_LOGGER, logging.INFO, __file__, 0, text, None, None)
                self.handleError(entry)


def configure_logging(level: str, redactor: Redactor, stream: IO[str] | None = None) -> None:
    """Set up the process's logging: the gateway's own records as text lines, the access log as
    bare JSON lines (its own handler, so each line is exactly one JSON object), both at `level`
    ("debug" | "info" | "warning" | "error"; the access log is written at info) and both through
    the redacting filter. Replaces whatever handlers were installed before."""
    stream = stream or sys.stderr
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    global _checker, _handler
    redacting = RedactingFilter(redactor)
    _checker = redactor
    _shapes.clear()  # (their verdicts were the previous redactor's)
    # no format here names a record's thread or process: every record (an access line per
    # request) skips looking them up
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False

    text = logging.StreamHandler(stream)
    text.setFormatter(logging.Formatter(TEXT_FORMAT))
    text.addFilter(redacting)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(text)
    root.setLevel(numeric)

    access = _LineHandler(stream)
    access.setFormatter(logging.Formatter("%(message)s"))
    access.addFilter(redacting)
    for handler in list(_access.handlers):
        _access.removeHandler(handler)
    _access.addHandler(access)
    _handler = access
    _access.setLevel(logging.NOTSET)  # follows the root level
    _access.propagate = False
