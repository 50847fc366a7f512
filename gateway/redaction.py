"""Keeping secrets out of everything the gateway writes: logs and client-facing error bodies.

The gateway never logs headers or request URLs with their query, so secrets have no direct way
out. This is the second line: the provider keys and client tokens it knows, and anything shaped
like a credential (`key=` URL parameters, bearer tokens, API-key header values), are replaced
before a log line or an error body leaves the process. A provider echoing a key in its error
message, or a library formatting a URL into an exception, then leaks nothing.
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

_PATTERNS = (
    # key=... / api_key=... / api-key=... in a URL or a form body
    re.compile(r"(?i)((?:^|[?&;\s\"'])(?:api[_-]?)?key=)[^&\s\"'#]+"),
    # a bearer credential wherever it is printed
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{4,}"),
    # API-key headers printed as "name: value" or "name=value" (a dict or header dump)
    re.compile(r"(?i)(\bx-(?:goog-)?api-key[\"']?\s*[:=]\s*[\"']?)[^\"'\s,;}]+"),
)
_BYTE_PATTERNS = tuple(re.compile(p.pattern.encode()) for p in _PATTERNS)


class Redactor:
    """Replaces known secret values and credential-shaped substrings. Immutable, cheap to share."""

    __slots__ = ("_secrets", "_secret_bytes")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # longest first: a key that contains another key is replaced whole
        unique = {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}
        self._secrets = tuple(sorted(unique, key=len, reverse=True))
        self._secret_bytes = tuple(s.encode() for s in self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        for pattern in _PATTERNS:
            value = pattern.sub(rf"\1{REDACTED}", value)
        return value

    def data(self, value: bytes) -> bytes:
        for secret in self._secret_bytes:
            if secret in value:
                value = value.replace(secret, REDACTED.encode())
        for pattern in _BYTE_PATTERNS:
            value = pattern.sub(rb"\1" + REDACTED.encode(), value)
        return value


def secrets_redactor(config: GatewayConfig, env: Mapping[str, str] | None = None) -> Redactor:
    """A redactor for every secret this config names (config.py reads them from the environment):
    each provider's key as set when the gateway starts, every client token, the continuity secret
    and the password of a redis store URL."""
    return Redactor(secret_values(config, env))


class RedactingFilter(logging.Filter):
    """A handler filter: the formatted message, the traceback and the stack of every record pass
    through the redactor before any formatter sees them."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        # the message is formatted here once, so a secret passed as an argument is caught too
        record.msg, record.args = self._redactor.text(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redactor.text(record.stack_info)
        return True
