"""What a module works out once per distinct key and keeps, bounded: the caches of the request
path whose keys are a few per deployment (URLs, header sets, log line shapes, tool lists'
nesting) but could be many where a client chooses them (a model name in a path, a header's
value), so they never grow past `most` entries.

Full, such a cache forgets every entry at once rather than the least recently used one: a full
cache means the keys are not few, and keeping the ordering for an LRU costs every hit (cachetools'
`LRUCache` runs Python code on each lookup), where a hit here is a plain `dict.get` in C (the
class adds a method, not a lookup path). Each operation is one dict operation, atomic under the
interpreter's lock: the event loop's thread and the worker thread of large bodies may share one
(at worst an entry another thread just kept is worked out again).
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A dict of at most `most` entries, kept through `keep`; looked up as any dict."""

    __slots__ = ("most",)

    def __init__(self, most: int) -> None:
        super().__init__()
        self.most = most

    def keep(self, key: K, value: V) -> V:
        """`value` kept under `key` (every entry forgotten first when `most` are kept), returned."""
        if len(self) >= self.most:
            self.clear()
        self[key] = value
        return value
