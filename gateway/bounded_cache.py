"""What a module works out once per distinct key and keeps, bounded: the caches of the request
path whose keys are a few per deployment (URLs, header sets, log line shapes, tool lists'
nesting) but could be many where a client chooses them (a model name in a path, a header's
value), so they never grow past `most` entries; and, for a cache whose entries keep large values
alive (the session keys keep the texts they were derived from), past a total weight.

Full, such a cache forgets every entry at once rather than the least recently used one: a full
cache means the keys are not few, and keeping the ordering for an LRU costs every hit (cachetools'
`LRUCache` runs Python code on each lookup), where a hit here is a plain `dict.get` in C (the
class adds a method, not a lookup path). Each operation is one dict operation, atomic under the
interpreter's lock: the event loop's thread and the worker thread of large bodies may share one
(at worst an entry another thread just kept is worked out again). A weighed cache's `keep` takes
a lock (its total is a read-modify-write): it runs on misses only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict[K, V]):
    """A dict of at most `most` entries, kept through `keep`; looked up as any dict. With `weigh`,
    also of entries weighing `heaviest` at most together (an entry heavier than that alone is
    not kept)."""

    __slots__ = ("most", "_weigh", "heaviest", "weight", "_lock")

    def __init__(self, most: int, weigh: Callable[[K, V], int] | None = None, heaviest: int = 0) -> None:
        super().__init__()
        self.most = most
        self._weigh = weigh
        self.heaviest = heaviest
        self.weight = 0  # of the entries kept (a weighed cache's)
        self._lock = threading.Lock() if weigh is not None else None

    def keep(self, key: K, value: V) -> V:
        """`value` kept under `key` (every entry forgotten first when full), returned."""
        if self._weigh is None:
            if len(self) >= self.most:
                self.clear()
            self[key] = value
            return value
        weight = self._weigh(key, value)
        assert self._lock is not None
        with self._lock:
            if key in self or weight > self.heaviest:  # kept by another thread meanwhile / too heavy
                return value
            if len(self) >= self.most or self.weight + weight > self.heaviest:
                self.clear()
            self[key] = value
            self.weight += weight
        return value

    def clear(self) -> None:
        super().clear()
        self.weight = 0
