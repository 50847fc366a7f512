"""The inspector: what the gateway did to every request (/inspector, `gateway inspect`).

One `Inspector` per process keeps the captures of the requests it served (gateway/inspector/
capture.py). With `--workers N` each worker keeps its own ring and also answers its siblings on a
private Unix socket (gateway/inspector/peers.py): the worker that takes an API call asks the others
and merges, so every worker's captures are visible whichever worker answers, and the request
path never serializes or sends anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gateway.inspector.capture import Capture, Ring, capture_of
from gateway.inspector.views import summary

if TYPE_CHECKING:
    from gateway.exchange import Exchange

FEED_QUEUE = 256  # summaries a slow feed reader may fall behind by before it misses some


class Inspector:
    __slots__ = ("enabled", "ring", "peers", "stopping", "_feeds", "before_read")

    def __init__(self, enabled: bool = True, max_bytes: int = 32 << 20) -> None:
        self.enabled = enabled
        self.ring = Ring(max_bytes)
        self.peers: tuple[str, ...] = ()  # sibling workers' sockets (gateway/inspector/peers.py)
        self._feeds: dict[asyncio.Queue[dict[str, Any]], str] = {}  # live readers -> their tenant
        self.stopping = asyncio.Event()  # set when the gateway stops: live feeds end
        # called before the API reads the ring: the requests that ended but are not captured yet
        # are (gateway/books.py)
        self.before_read: Callable[[], None] = _nothing

    def capture(
        self,
        exchange: Exchange,
        headers: Mapping[str, str],
        ended: float | None = None,
        wall: float | None = None,
    ) -> None:
        """Called once per request once it ended (`ended`, `wall`: when, on the monotonic and
        the wall clock; default now): keeps references, serializes nothing (unless a live feed
        is open, which gets the summary)."""
        if not self.enabled:
            return
        capture = capture_of(exchange, headers, ended, wall)
        if self.ring.add(capture) and self._feeds:
            self._publish(capture)

    def _publish(self, capture: Capture) -> None:
        line = summary(capture)
        for queue, tenant in self._feeds.items():
            if tenant == capture.tenant:
                try:
                    queue.put_nowait(line)
                except asyncio.QueueFull:
                    pass  # a reader that stopped reading misses summaries, never holds memory

    def subscribe(self, tenant: str) -> asyncio.Queue[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(FEED_QUEUE)
        self._feeds[queue] = tenant
        return queue

    def unsubscribe(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self._feeds.pop(queue, None)


def _nothing() -> None:
    pass
