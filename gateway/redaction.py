"""Keeping secrets out of everything the gateway writes: logs and client-facing error bodies.

The gateway never logs headers or request URLs with their query, so secrets have no direct way
out. This is the second line: every run of 8 or more characters of a provider key, client token
or other configured secret, a masked echo of one (`sk-proj-****wxyz`), and anything shaped like a
credential (`key=` URL parameters, bearer tokens, API-key header values) are replaced before a
log line or an error body leaves the process. A provider echoing a key in its error message, or
a library formatting a URL into an exception, then leaks nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

from gateway.config import GatewayConfig, secret_values

REDACTED = "[redacted]"
# Shorter values are not credentials anyone should rely on, and replacing them would mangle
# ordinary words (the simulators accept "sim").
MIN_SECRET_LENGTH = 8
# No run of this many consecutive characters of a secret gets out (except one that is a plain
# lowercase word, see _is_word): a provider that quotes part of a key ("the first 8 characters")
# or a log line cut in the middle of one leaks nothing usable.
FRAGMENT = 8
# The shortest start or end of a secret that, next to a mask, makes a masked echo: OpenAI's
# "Incorrect API key provided: sk-proj-****wxyz" shows the key's first characters and last four.
MASKED_EDGE = 3
# the fragment scan's pieces and step (QUAD + STRIDE - 1 == FRAGMENT: see Redactor._fragments)
QUAD = 4
STRIDE = 5

_PATTERNS = (  # each with the literal it cannot match without (see Redactor.text)
    # key=... / api_key=... / api-key=... in a URL or a form body
    re.compile(r"(?i)((?:^|[?&;\s\"'])(?:api[_-]?)?key=)[^&\s\"'#]+"),
    # a bearer credential wherever it is printed: at least 8 token characters, one of them a digit
    # or punctuation (so prose such as "invalid bearer token" is left alone)
    re.compile(r"(?i)(\bbearer\s+)(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}"),
    # API-key headers printed as "name: value" or "name=value" (a dict or header dump)
    re.compile(r"(?i)(\bx-(?:goog-)?api-key[\"']?\s*[:=]\s*[\"']?)[^\"'\s,;}]+"),
)
# a masked credential: credential characters around a run of mask characters
# (matched from the start of a token only: trying every position inside a long word would make
# this quadratic in the word's length)
_MASKED = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z0-9_-]*)(?:\*{3,}|\u2022{3,}|\.{3,}|\u2026)([A-Za-z0-9_-]*)")
# What every match of _MASKED contains, and what every match of each of _PATTERNS contains
# lowercased. Every log line passes through Redactor.text and almost none holds any of these:
# a substring test skips a regex scan of the whole line. (The lowercase test is exact only for
# ASCII text: IGNORECASE also matches a few non-ASCII letters, and the dotless "\u0131" matches "i"
# without lowercasing to it.)
_MASKS = ("***", "\u2022\u2022\u2022", "...", "\u2026")
_NEEDS = ("key=", "bearer", "api-key")


def _is_word(gram: str) -> bool:
    """Eight lowercase letters: a word ("provider"), not a credential's signature. Such a window
    alone does not start a redaction - a hand-made token such as "team-provider-key-1" would
    otherwise redact that word from every log line (the access log's JSON keys included) - but it
    extends one next to it. (In a random key such a run is rare and says little.)"""
    return gram.isascii() and gram.isalpha() and gram.islower()


class Redactor:
    """Replaces every fragment of the known secrets, their masked echoes, and credential-shaped
    substrings. Immutable but for its memo of strings found clean (`clean`); cheap to share."""

    __slots__ = ("_grams", "_seeds", "_quads", "_heads", "_tails", "quote_free", "_clean", "_clean_sets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        # no secret holds a double quote: no window of a JSON text that crosses a string's quote
        # is a fragment of one (what `clean` relies on)
        self.quote_free = not any('"' in s for s in unique)
        self._clean: set[str] = set()  # strings found clean (`clean`)
        self._clean_sets: set[tuple[str, ...]] = set()  # tuples of them (`clean_all`)
        self._grams = frozenset(s[i : i + FRAGMENT] for s in unique for i in range(len(s) - FRAGMENT + 1))
        self._seeds = frozenset(g for g in self._grams if not _is_word(g))
        self._quads = frozenset(g[i : i + QUAD] for g in self._seeds for i in range(FRAGMENT - QUAD + 1))
        self._heads = tuple(s[:-MASKED_EDGE] for s in unique)
        self._tails = tuple(s[MASKED_EDGE:] for s in unique)

    def text(self, value: str) -> str:
        if self._seeds:
            if any(mask in value for mask in _MASKS):
                value = _MASKED.sub(self._masked, value)
            value = self._fragments(value)
        lowered = value.lower() if value.isascii() else None
        for pattern, needs in zip(_PATTERNS, _NEEDS, strict=True):
            if lowered is None or needs in lowered:
                value = pattern.sub(rf"\1{REDACTED}", value)
        return value

    def clean(self, value: str) -> bool:
        """Whether the string `value`, written in a compact JSON text (as a key or a value), leaves
        nothing there for `text` to redact. Decided once per spelling (bounded: past `_MAX_CLEAN`
        spellings, a value is judged afresh).

        Sound because the string is written as is (nothing in it is escaped); with `quote_free`, no
        window of a secret crosses the quotes around it; and it is judged in its context: after a
        quote (which the patterns' anchors and lookbehinds treat as they treat the start of a
        text), and before a quote, a colon and a value, as a key is written (a credential header's
        name followed by a value is what one pattern takes; a value is followed by less)."""
        if value in self._clean:
            return True
        framed = f'"{value}":0'
        if not (
            self.quote_free
            and value.isprintable()
            and '"' not in value
            and "\\" not in value
            and self.text(framed) == framed
        ):
            return False
        if len(self._clean) < _MAX_CLEAN:
            self._clean.add(value)
        return True

    def clean_all(self, values: tuple[str, ...]) -> bool:
        """Every one of `values` `clean`: decided once per tuple (bounded as `clean`), so that a
        text made of such strings (an access-log line: gateway/access_log.py) need not be
        scanned whole."""
        if values in self._clean_sets:
            return True
        if not all(self.clean(value) for value in values):
            return False
        if len(self._clean_sets) < _MAX_CLEAN:
            self._clean_sets.add(values)
        return True

    def data(self, value: bytes) -> bytes:
        # bytes that are not UTF-8 go through unchanged (surrogateescape round-trips them)
        return self.text(value.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def _masked(self, match: re.Match[str]) -> str:
        """A masked token whose visible start begins a secret or whose visible end ends one."""
        head, tail = match.group(1), match.group(2)
        if (
            len(head) >= MASKED_EDGE and any(h.startswith(head) or head.startswith(h) for h in self._heads)
        ) or (len(tail) >= MASKED_EDGE and any(t.endswith(tail) or tail.endswith(t) for t in self._tails)):
            return REDACTED
        return match.group(0)

    def _fragments(self, value: str) -> str:
        """`value` with every run covered by FRAGMENT-character windows of a secret replaced.

        A run starts from a window that is not a plain word (`_seeds`) and then grows over any
        window of a secret, words included. Only every STRIDE-th position is looked up, in the
        seeds' QUAD-character pieces: a matching window [i, i+8) always contains the piece at
        the one multiple of STRIDE in [i, i+4], so only the windows around a piece that matched
        need checking (a fifth of the lookups of checking every window: this runs on every log
        line)."""
        seeds, quads = self._seeds, self._quads
        last_window = len(value) - FRAGMENT
        runs: list[list[int]] = []
        for q in range(0, len(value) - QUAD + 1, STRIDE):
            if value[q : q + QUAD] in quads:
                for i in range(max(0, q + QUAD - FRAGMENT), min(q, last_window) + 1):
                    if value[i : i + FRAGMENT] in seeds:
                        # ascending: the ranges of two pieces never overlap
                        if runs and i <= runs[-1][1]:
                            runs[-1][1] = i + FRAGMENT
                        else:
                            runs.append([i, i + FRAGMENT])
        if not runs:
            return value
        grams = self._grams
        out: list[str] = []
        copied = 0  # how far `value` has been copied to `out`
        for start, end in runs:
            # grow over every window of a secret that overlaps or touches the run
            j = start - 1
            while j >= max(copied, start - FRAGMENT):
                if value[j : j + FRAGMENT] in grams:
                    start = j
                j -= 1
            i = end - FRAGMENT + 1
            while i <= min(end, last_window):
                if value[i : i + FRAGMENT] in grams:
                    end = i + FRAGMENT
                i += 1
            if start > copied or not out:
                out += (value[copied:start], REDACTED)
            copied = max(copied, end)
        out.append(value[copied:])
        return "".join(out)


_MAX_CLEAN = 4096


def secrets_redactor(config: GatewayConfig, env: Mapping[str, str] | None = None) -> Redactor:
    """A redactor for every secret this config names (gateway/config/ reads them from the environment):
    each provider's key as set when the gateway starts, every client token, the continuity secret
    and the password of a redis store URL."""
    return Redactor(secret_values(config, env))


# a LogRecord attribute: the Redactor its message was checked with, piece by piece, where it was
# made (gateway/access_log.py): the filter of that redactor passes it without a scan
CHECKED_BY = "checked_by"


class RedactingFilter(logging.Filter):
    """A handler filter: the formatted message, the traceback and the stack of every record pass
    through the redactor before any formatter sees them."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.__dict__.get(CHECKED_BY) is self._redactor and not (
            record.args or record.exc_info or record.stack_info
        ):
            return True  # a message made only of strings this redactor found clean (`clean`)
        # the message is formatted here once, so a secret passed as an argument is caught too
        record.msg, record.args = self._redactor.text(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redactor.text(record.stack_info)
        return True
