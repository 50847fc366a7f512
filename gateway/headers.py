"""Header allow-lists: what a provider call may carry (checked in `upstream.py` where it is sent),
and the per-name verdicts both allow-lists share (the client-response list is gateway/security.py's).

A provider call carries only the headers it needs: the adapters build them from scratch from
config and the family records, nothing of the client's is copied. The check stays as a backstop
for an adapter that sets a header its family record does not name: it is dropped and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping

from gateway.providers import FAMILIES

log = logging.getLogger(__name__)

# What a provider call may carry: HTTP framing the client adds (upstream_http.py), and the headers
# each provider family sets (its record names them: the gateway's own provider key, its API
# version...)
_UPSTREAM_FRAMING = ("host", "content-length", "accept", "accept-encoding", "user-agent")
UPSTREAM_REQUEST_HEADERS = frozenset(_UPSTREAM_FRAMING).union(
    *(family.upstream_headers() for family in FAMILIES.values())
)

_warned: set[str] = set()


def drop_header(headers: MutableMapping[str, str], name: str, direction: str) -> None:
    # once per name and direction: a new header someone adds shows up in the log, not per request
    key = f"{direction}:{name.lower()}"
    if key not in _warned:
        _warned.add(key)
        log.warning("dropped %s header %r: not on the allow-list (gateway/headers.py)", direction, name)
    del headers[name]


class Verdicts(dict[str, bool]):
    """A header name as written -> whether an allow-list takes it, decided once per spelling (the
    adapters and the gateway write the same few names on every request; a name never seen is
    judged by `allowed`). Bounded: past `_MAX_VERDICTS` spellings, a name is judged afresh."""

    __slots__ = ("_allowed",)

    def __init__(self, allowed: Callable[[str], bool]) -> None:
        super().__init__()
        self._allowed = allowed

    def __missing__(self, name: str) -> bool:
        verdict = self._allowed(name.lower())
        if len(self) < _MAX_VERDICTS:
            self[name] = verdict
        return verdict


class AllowList:
    """An allow-list's verdicts per set of names: the gateway writes the same few sets on every
    call or answer, so each set is judged once (a tuple lookup, not a verdict per name per
    message). Bounded as `Verdicts`."""

    __slots__ = ("_verdicts", "_sets")

    def __init__(self, allowed: Callable[[str], bool]) -> None:
        self._verdicts = Verdicts(allowed)
        # the names of a message's headers, as written and in order -> those the list refuses
        self._sets: dict[tuple[str, ...], tuple[str, ...]] = {}

    def refused(self, names: tuple[str, ...]) -> tuple[str, ...]:
        refused = self._sets.get(names)
        if refused is None:
            verdicts = self._verdicts
            refused = tuple(dict.fromkeys(n for n in names if not verdicts[n]))
            if len(self._sets) < _MAX_VERDICTS:
                self._sets[names] = refused
        return refused


_MAX_VERDICTS = 1024

_UPSTREAM = AllowList(UPSTREAM_REQUEST_HEADERS.__contains__)


def upstream_headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """`headers` as a provider call may carry them: only allow-listed names. The adapters write
    the same few names on every call, so the verdict is made once per set of names and an allowed
    set is passed on as it is (no copy, no per-name check per call)."""
    refused = _UPSTREAM.refused(tuple(headers))
    if not refused:
        return headers
    kept = dict(headers)
    for name in refused:
        drop_header(kept, name, "upstream request")
    return kept
