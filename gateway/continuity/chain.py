"""Kept conversations as chains: an answer kept under its id (`previous_response_id`) stores only
what its request added (the messages sent after the history it continued, and the answer) and the
ids of its nearest ancestors; continuing it reads the chain back to its root.

Storage is therefore linear in what was sent: a 1,000-turn chain keeps each turn once instead of
every turn's whole conversation (quadratic). Each record names up to `ANCESTORS` ancestors, so a
chain of depth d is read in about d / ANCESTORS batched lookups, not d round trips.

Links are immutable once written, so the links this process wrote or read are kept decoded in a
bounded LRU (`LinkCache`): continuing the answer just given, the usual case, reads nothing from the
store but what another process wrote.

Every record expires `ttl_seconds` after it was written, and a chain's root is older than its tip:
a link read while continuing that was written more than half a TTL ago is written again (with its
new time), so a conversation still in use never loses its beginning, at the cost of rewriting each
link at most once per half TTL.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from gateway.continuity.codec import KeptItem, Link, decode_link, encode_item, encode_link
from gateway.continuity.items import Found, resolve_items
from gateway.continuity.keys import history_key, item_key
from gateway.continuity.recorder import Recorder
from gateway.ingress.base import HistoryRef, ItemRef, KeptItems
from gateway.ingress.errors import ClientError, echo
from gateway.offload import Offload
from gateway.store.base import StoreUnavailable
from gateway.store.failopen import FailOpenStore
from gateway.transcript.model import Message

# ancestor ids each record names: the lookups per continuation are depth / ANCESTORS + 1, and a
# record carries at most this many ids (~35 bytes each) besides its messages
ANCESTORS = 16
# seconds a client waits before retrying a continuation the store could not answer
RETRY_AFTER_SECONDS = 1

Lookup = Callable[[Sequence[str]], Awaitable[list[bytes | None]]]
# what a decoded link holds beyond its record's bytes (its objects are about twice the record)
_DECODED_FACTOR = 2
_ENTRY_OVERHEAD = 256


class LinkCache:
    """Decoded links by store key, least recently used first out beyond `max_bytes` (counted as
    twice each record's size: the decoded objects). `max_bytes` 0 keeps nothing."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._links: OrderedDict[str, tuple[int, Link]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._links)

    def get(self, key: str) -> Link | None:
        entry = self._links.get(key)
        if entry is None:
            return None
        self._links.move_to_end(key)
        return entry[1]

    def put(self, key: str, link: Link, record_bytes: int) -> None:
        size = _DECODED_FACTOR * record_bytes + _ENTRY_OVERHEAD
        if size > self.max_bytes:
            return
        old = self._links.pop(key, None)
        if old is not None:
            self.size -= old[0]
        self._links[key] = (size, link)
        self.size += size
        while self.size > self.max_bytes:
            _, (evicted, _) = self._links.popitem(last=False)
            self.size -= evicted


@dataclass(frozen=True, slots=True)
class Kept:
    """The answer a request continues, resolved: its whole transcript and where a new link goes."""

    id: str
    depth: int  # the continued answer's depth
    ancestors: tuple[str, ...]  # answer ids, parent first: the ancestors of an answer to it
    messages: tuple[Message, ...]  # the whole conversation up to and including the kept answer
    stale: tuple[tuple[str, Link], ...]  # links to write again (older than half the TTL)
    answers: frozenset[str] = frozenset()  # the ids of every answer of the chain, this one included

    def child(self, messages: tuple[Message, ...], now: float) -> Link:
        """The link of an answer that continues this one, adding `messages`."""
        return Link(self.depth + 1, now, self.ancestors, messages)


def root(messages: tuple[Message, ...], now: float) -> Link:
    """The link of an answer that continued nothing."""
    return Link(0, now, (), messages)


def refreshed(link: Link, now: float) -> Link:
    return Link(link.depth, now, link.ancestors, link.messages)


def _not_kept(history: HistoryRef, detail: str) -> ClientError:
    return ClientError(400, detail, param=history.source, code=history.not_found_code)


async def resolve(
    lookup: Lookup,
    cache: LinkCache,
    history: HistoryRef,
    tenant: str,
    *,
    max_depth: int,
    refresh_before: float,
    offload: Callable[[], Offload] | None = None,
) -> Kept:
    """The conversation `history` names, or the client's error: 400 when nothing (or not all of
    it) is kept or the chain would exceed `max_depth`; 503 (retryable) when the store cannot
    answer. `lookup` raises StoreUnavailable for a store that failed (not for a miss).
    `offload`: the request's worker-thread work (gateway/offload.py), for a long record read."""
    try:
        return await _resolve(_Links(lookup, cache, offload), history, tenant, max_depth, refresh_before)
    except StoreUnavailable:
        raise unavailable(history.source, repr(echo(history.id))) from None


def unavailable(param: str, what: str) -> ClientError:
    """The retryable 503 of a request whose kept conversation the store cannot give now."""
    return ClientError(
        503,
        f"{param}: the continuity store holding {what} cannot be reached right now; retry shortly",
        type="server_error",
        param=param,
        code="store_unavailable",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


class _Links:
    """Links by store key: from the cache, else read (in one lookup per batch) and cached."""

    def __init__(self, lookup: Lookup, cache: LinkCache, offload: Callable[[], Offload] | None) -> None:
        self._lookup = lookup
        self._cache = cache
        self._offload = offload

    async def get(self, keys: list[str]) -> list[Link | None]:
        cache = self._cache
        links = [cache.get(key) for key in keys]
        missing = [key for key, link in zip(keys, links, strict=True) if link is None]
        if not missing:
            return links
        read: dict[str, Link | None] = {}
        for key, raw in zip(missing, await self._lookup(missing), strict=True):
            if raw is not None and len(raw) >= OFFLOAD_RECORD_BYTES and self._offload is not None:
                link = await self._offload().run(decode_link, raw)
            else:
                link = decode_link(raw) if raw is not None else None
            if link is not None and raw is not None:
                cache.put(key, link, len(raw))
            read[key] = link
        return [read[key] if link is None else link for key, link in zip(keys, links, strict=True)]


async def _resolve(
    links_of: _Links, history: HistoryRef, tenant: str, max_depth: int, refresh_before: float
) -> Kept:
    tip = (await links_of.get([history_key(history.id, tenant)]))[0]
    if tip is None:
        raise _not_kept(
            history,
            f"{history.source}: no answer {echo(history.id)!r} is kept here (unknown, or older than the "
            "store's ttl_seconds)",
        )
    if tip.depth + 2 > max_depth:  # the answer to this request would be one more
        raise ClientError(
            400,
            f"{history.source}: {echo(history.id)!r} ends a chain of {tip.depth + 1} kept answers; this"
            f" gateway keeps chains of at most {max_depth} answers ([store] max_chain_depth): send"
            " the conversation's items instead",
            param=history.source,
            code="previous_response_chain_too_deep",
        )
    links: list[tuple[str, Link]] = [(history.id, tip)]
    current = tip
    while current.depth > 0:
        ids = current.ancestors
        if len(ids) != min(current.depth, ANCESTORS):
            raise _broken(history)
        found = await links_of.get([history_key(i, tenant) for i in ids])
        for offset, (ancestor, link) in enumerate(zip(ids, found, strict=True)):
            # depths fall by one per step: a chain always ends, even in a corrupted store
            if link is None or link.depth != current.depth - 1 - offset:
                raise _broken(history)
            links.append((ancestor, link))
        current = links[-1][1]
    messages: list[Message] = []
    for _, link in reversed(links):
        messages.extend(link.messages)
    return Kept(
        history.id,
        tip.depth,
        (history.id, *tip.ancestors)[:ANCESTORS],
        tuple(messages),
        tuple((i, link) for i, link in links if link.written < refresh_before),
        frozenset(i for i, _ in links),
    )


def _broken(history: HistoryRef) -> ClientError:
    return _not_kept(
        history,
        f"{history.source}: an earlier answer of the conversation {echo(history.id)!r} continues is no"
        " longer kept (older than the store's ttl_seconds, or evicted): send the conversation's"
        " items instead",
    )


# the decoded links one process keeps (LinkCache)
LINK_CACHE_BYTES = 32 << 20
# a record read from the store this long is decoded in the worker thread (when the request gives
# one): decoding is linear in its blocks, ~2-4 us each (a 190,000-block answer's 2.9 MB: 0.4-0.8 s)
OFFLOAD_RECORD_BYTES = 64 << 10


class History:
    """The process's kept answers: resolves a `previous_response_id` and the items a request names
    by id (the recorder's writes in flight first, then the store, strictly: a store that fails is
    a 503) and keeps new answers with their items."""

    def __init__(
        self,
        store: FailOpenStore,
        recorder: Recorder,
        *,
        ttl_seconds: float,
        max_depth: int,
        cache_bytes: int = LINK_CACHE_BYTES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._recorder = recorder
        self._ttl = ttl_seconds
        self._max_depth = max_depth
        self._clock = clock
        self.cache = LinkCache(cache_bytes)

    async def _lookup(self, keys: Sequence[str]) -> list[bytes | None]:
        found = self._recorder.pending(list(keys))
        missing = [k for k in keys if k not in found]
        if missing:
            found.update(zip(missing, await self._store.get_many(missing, fail_open=False), strict=True))
        return [found.get(k) for k in keys]

    async def resolve(
        self, history: HistoryRef, tenant: str, offload: Callable[[], Offload] | None = None
    ) -> Kept:
        """`offload`: the request's worker-thread work, made when a long record is read."""
        now = self._clock()
        kept = await resolve(
            self._lookup,
            self.cache,
            history,
            tenant,
            max_depth=self._max_depth,
            refresh_before=now - self._ttl / 2,
            offload=offload,
        )
        for answer_id, link in kept.stale:  # a conversation in use keeps its beginning
            self._put(history_key(answer_id, tenant), refreshed(link, now), tenant)
        return kept

    async def items(self, refs: Sequence[ItemRef], tenant: str) -> Found:
        """The kept items `refs` name (gateway/continuity/items.py), strictly as `resolve`."""
        try:
            found = await resolve_items(self._lookup, refs, tenant)
        except StoreUnavailable:
            raise unavailable(refs[0].param, "the items this request names") from None
        now = self._clock()
        for item_id, item in found.items():  # a conversation in use keeps its items
            if item.written < now - self._ttl / 2:
                self._write_item(item_id, KeptItem(item.answer, now, item.blocks), tenant)
        return found

    async def keep(
        self,
        answer_id: str,
        tenant: str,
        continued: Kept | None,
        messages: tuple[Message, ...],
        items: KeptItems = (),
        offload: Offload | None = None,
    ) -> None:
        """Keep an answer under its id: `messages` is the whole conversation it ends (what it
        continued included), `items` the answer's items by the ids the client got for them (a
        later request may name them). Returns once the store has them all (or failed open: they
        then wait in the store's retry queue). `offload`: a large request's, whose new messages
        are encoded in the worker thread (gateway/offload.py)."""
        now = self._clock()
        if continued is None:
            link = root(messages, now)
        else:
            link = continued.child(messages[len(continued.messages) :], now)
        raw = await offload.run(encode_link, link) if offload is not None else encode_link(link)
        writes = [self._put(history_key(answer_id, tenant), link, tenant, raw)]
        writes.extend(
            self._write_item(item_id, KeptItem(answer_id, now, blocks), tenant) for item_id, blocks in items
        )
        await (writes[0] if len(writes) == 1 else asyncio.gather(*writes))

    def _write_item(self, item_id: str, item: KeptItem, tenant: str) -> asyncio.Future[None]:
        return self._recorder.write([item_key(item_id, tenant)], encode_item(item), tenant)

    def _put(self, key: str, link: Link, tenant: str, raw: bytes | None = None) -> asyncio.Future[None]:
        if raw is None:
            raw = encode_link(link)
        self.cache.put(key, link, len(raw))
        return self._recorder.write([key], raw, tenant)
