"""A streamed answer's body read as the relay reads it (gateway/routing/answer.py `poll`,
gateway/stream_relay.py): `Upstream.take`, awaiting the connection's future when nothing is in yet,
or (`pushed`) told of each arrival through `Upstream.on_arrival` (the push relay) and taking
again then."""

from __future__ import annotations

import asyncio

from gateway.upstream import Upstream

MODES = ("awaited", "pushed")


async def next_chunk(upstream: Upstream, pushed: bool = False) -> bytes:
    """The next body chunk as it arrives; b"" at the end. A broken connection raises
    UpstreamFailure, as the relay sees it."""
    arrived = asyncio.Event()
    if pushed:
        upstream.on_arrival(arrived.set)
    try:
        while True:
            arrived.clear()
            chunk = upstream.take()
            if type(chunk) is bytes:
                return chunk
            if pushed:  # LATER: the next arrival calls the sink
                await arrived.wait()
            else:
                await chunk  # type: ignore[misc]
    finally:
        if pushed:
            upstream.on_arrival(None)
