"""Fail-open wrapper: a store outage costs continuity (a miss), never a request.

Every operation that can wait is bounded by a timeout, every failure becomes a miss or a no-op,
and every outcome is reported once to `on_op(backend, op, outcome)` (the
`gateway_store_operations_total` counter).
After a failure the wrapper can skip the backend for a short back-off, so a dead remote store does
not add its connect timeout to every request.

A write that failed is not lost: it waits in a bounded queue (readable by lookups meanwhile) and is
written again once the backend answers, so a short outage loses nothing (op `retry`: `queued`,
`ok`, and `dropped` for what the bound pushed out or shutdown left unwritten). Continuing a kept
answer by its id asks with `fail_open=False`: a failed lookup then raises `StoreUnavailable` (a
retryable 503 for the client) instead of reading as "no such answer"."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from gateway.store.base import ContinuityStore, StoreBusy, StoreFault, StoreRefused, StoreUnavailable
from gateway.store.loop_bound import LoopTimeBound

log = logging.getLogger(__name__)

# (backend, op, outcome), and how many operations it counts when more than one
OnOp = Callable[..., None]

DEFAULT_OP_TIMEOUT_SECONDS = 1.0
# Closing may flush (SQLite checkpoints its WAL), which can take longer than one lookup.
DEFAULT_CLOSE_TIMEOUT_SECONDS = 5.0
# failed writes kept for a retry: beyond either bound the oldest are dropped (counted)
DEFAULT_RETRY_QUEUE_ENTRIES = 10_000
DEFAULT_RETRY_QUEUE_BYTES = 64 << 20
# a backend that never suspends (MemoryStore.waits False) gets no time bound: its timer could
# never fire (stateless, so one serves every operation)
_UNBOUNDED = contextlib.nullcontext()
# the first retry waits this long (or the back-off, if longer), doubling up to the max while the
# backend still fails
_RETRY_FIRST_SECONDS = 0.25
_RETRY_MAX_SECONDS = 5.0


class FailOpenStore:
    """`ContinuityStore` over `inner` that never raises (except cancellation).

    Reports: op "get" once per requested key ("hit" / "miss", or "error" / "timeout" when the
    lookup failed); "put" once per call ("ok" / "error" / "timeout", or "busy" when the backend
    skipped it because another connection holds its write lock); "ping" once per call ("ok" /
    "error" / "timeout"). While backing off, get and put are not attempted and count as "error";
    ping always reaches the backend (readiness must reflect reality) and a successful ping ends the
    back-off early."""

    def __init__(
        self,
        inner: ContinuityStore,
        on_op: OnOp | None = None,
        *,
        op_timeout_seconds: float = DEFAULT_OP_TIMEOUT_SECONDS,
        close_timeout_seconds: float = DEFAULT_CLOSE_TIMEOUT_SECONDS,
        backoff_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        retry_queue_entries: int = DEFAULT_RETRY_QUEUE_ENTRIES,
        retry_queue_bytes: int = DEFAULT_RETRY_QUEUE_BYTES,
    ) -> None:
        self.inner = inner
        self.backend: str = inner.backend
        self._on_op = on_op
        self._op_timeout = op_timeout_seconds
        self._close_timeout = close_timeout_seconds
        self.backoff_seconds = backoff_seconds
        self._clock = clock
        # a backend that never suspends (MemoryStore) needs no bound: its timer could never fire
        self._bounded: bool = getattr(inner, "waits", True)
        self._retry_at = 0.0  # clock value before which get/put are skipped
        # key -> (value, tenant) of writes that failed, oldest first; `_queued_bytes` counts values
        self._queue: OrderedDict[str, tuple[bytes, str]] = OrderedDict()
        self._queued_bytes = 0
        self._queue_entries = retry_queue_entries
        self._queue_bytes = retry_queue_bytes
        self._flusher: asyncio.Task[None] | None = None

    def _report(self, op: str, outcome: str, times: int = 1) -> None:
        if self._on_op is None or times <= 0:
            return
        try:
            if times == 1:
                self._on_op(self.backend, op, outcome)
            else:  # once for a batch: a long transcript looks up hundreds of keys a turn
                self._on_op(self.backend, op, outcome, times)
        except Exception:  # a metrics bug must not turn into a store failure
            log.exception("continuity store on_op callback failed")

    def _backing_off(self) -> bool:
        return self.backoff_seconds > 0 and self._clock() < self._retry_at

    def _start_backoff(self) -> None:
        if self.backoff_seconds > 0:
            self._retry_at = self._clock() + self.backoff_seconds

    def _failed(self, op: str, exc: BaseException) -> str:
        if isinstance(exc, StoreBusy | StoreFault):  # the backend said so once, when it began
            log.debug("continuity store %s %s failed open: %s", self.backend, op, exc)
            return "busy" if isinstance(exc, StoreBusy) else "error"
        # TimeoutError covers our own bound and backends that translate their client timeouts.
        outcome = "timeout" if isinstance(exc, TimeoutError) else "error"
        self._start_backoff()
        # said here once: the lookups the back-off skips are counted (get/error), not logged
        backing_off = (
            f"; backing off {self.backoff_seconds:g} s (lookups miss)" if self.backoff_seconds > 0 else ""
        )
        log.warning(
            "continuity store %s %s failed (%s: %s); failing open%s",
            self.backend,
            op,
            type(exc).__name__,
            exc,
            backing_off,
        )
        return outcome

    async def get_many(self, keys: Sequence[str], *, fail_open: bool = True) -> list[bytes | None]:
        """Values for `keys` (None: a miss). A failed lookup reads as misses, or raises
        StoreUnavailable when `fail_open` is False."""
        if not keys:
            return []
        queue = self._queue
        if queue:  # what waits for a retry is still this gateway's record
            queued = [entry[0] if (entry := queue.get(key)) is not None else None for key in keys]
            rest = [key for key, value in zip(keys, queued, strict=True) if value is None]
            if len(rest) < len(keys):
                self._report("get", "hit", len(keys) - len(rest))
                found = iter(await self._get(rest, fail_open) if rest else ())
                return [next(found) if value is None else value for value in queued]
        return await self._get(keys, fail_open)

    async def _get(self, keys: Sequence[str], fail_open: bool) -> list[bytes | None]:
        if self._backing_off():
            self._report("get", "error", len(keys))
            if not fail_open:
                raise StoreUnavailable(f"the {self.backend} store is backing off after a failure")
            return [None] * len(keys)
        try:
            async with LoopTimeBound(self._op_timeout) if self._bounded else _UNBOUNDED:
                values = await self.inner.get_many(keys)
            if len(values) != len(keys):
                raise ValueError(f"backend returned {len(values)} values for {len(keys)} keys")
        except Exception as exc:
            self._report("get", self._failed("get", exc), len(keys))
            if not fail_open:
                raise StoreUnavailable(f"the {self.backend} store failed: {type(exc).__name__}") from None
            return [None] * len(keys)
        hits = len(values) - values.count(None)  # in C: a batch is a whole history's lookups
        self._report("get", "hit", hits)
        self._report("get", "miss", len(keys) - hits)
        return values

    async def put(self, keys: Sequence[str], value: bytes, *, tenant: str = "") -> None:
        if not keys:
            return
        if self._backing_off():
            self._report("put", "error")
            self._enqueue(keys, value, tenant)
            return
        try:
            async with LoopTimeBound(self._op_timeout) if self._bounded else _UNBOUNDED:
                evicted = await self.inner.put(keys, value, tenant=tenant)
        except Exception as exc:
            self._report("put", self._failed("put", exc))
            if not isinstance(exc, StoreRefused):
                self._enqueue(keys, value, tenant)
            return
        self._report("put", "ok")
        if evicted:
            self._report("evict", "ok", evicted)
        if self._queue:
            self._written(keys, value)

    # --- the retry queue ---

    def _enqueue(self, keys: Sequence[str], value: bytes, tenant: str) -> None:
        queue = self._queue
        for key in keys:
            old = queue.pop(key, None)
            if old is not None:
                self._queued_bytes -= len(old[0])
            queue[key] = (value, tenant)
            self._queued_bytes += len(value)
        self._report("retry", "queued", len(keys))
        dropped = 0
        while queue and (len(queue) > self._queue_entries or self._queued_bytes > self._queue_bytes):
            _, (old_value, _) = queue.popitem(last=False)
            self._queued_bytes -= len(old_value)
            dropped += 1
        if dropped:
            log.warning(
                "continuity store %s: retry queue full, %d failed writes dropped", self.backend, dropped
            )
            self._report("retry", "dropped", dropped)
        if queue and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.get_running_loop().create_task(self._flush_when_back())

    def _written(self, keys: Sequence[str], value: bytes) -> None:
        """`value` is in the backend under `keys`: a queued older write of those keys is moot."""
        queue = self._queue
        for key in keys:
            entry = queue.pop(key, None)
            if entry is not None:
                self._queued_bytes -= len(entry[0])

    @property
    def queued(self) -> int:
        """Failed writes waiting for a retry."""
        return len(self._queue)

    async def _flush_when_back(self) -> None:
        delay = max(_RETRY_FIRST_SECONDS, self.backoff_seconds)
        while self._queue:
            await asyncio.sleep(delay)
            if not await self.flush():
                delay = min(_RETRY_MAX_SECONDS, delay * 2)

    async def flush(self) -> bool:
        """Write what the queue holds, oldest first, until it is empty (True) or the backend fails
        again (False). Consecutive keys of one record go in one write."""
        queue = self._queue
        while queue:
            key, (value, tenant) = next(iter(queue.items()))
            keys = [key]
            for other, (other_value, _) in queue.items():
                if other != key:
                    if other_value is not value:
                        break
                    keys.append(other)
            try:
                async with LoopTimeBound(self._op_timeout):
                    evicted = await self.inner.put(keys, value, tenant=tenant)
            except Exception as exc:
                if isinstance(exc, StoreRefused):  # it never will be: not retried
                    self._unqueue(keys, value)
                    self._report("retry", "dropped", len(keys))
                    continue
                self._failed("put", exc)
                return False
            self._retry_at = 0.0
            self._report("retry", "ok", self._unqueue(keys, value))
            if evicted:
                self._report("evict", "ok", evicted)
        return True

    def _unqueue(self, keys: list[str], value: bytes) -> int:
        removed = 0
        for key in keys:
            entry = self._queue.get(key)
            if entry is not None and entry[0] is value:  # not rewritten meanwhile
                del self._queue[key]
                self._queued_bytes -= len(value)
                removed += 1
        return removed

    async def ping(self) -> bool:
        try:
            async with LoopTimeBound(self._op_timeout):
                reachable = await self.inner.ping()
        except Exception as exc:
            self._report("ping", self._failed("ping", exc))
            return False
        if not reachable:
            self._start_backoff()
            self._report("ping", "error")
            return False
        self._retry_at = 0.0
        self._report("ping", "ok")
        return True

    async def close(self) -> None:
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.cancel()
        try:
            async with asyncio.timeout(self._close_timeout):
                if self._queue:  # a last try: the backend may be back
                    await self.flush()
                await self.inner.close()
        except Exception as exc:
            log.warning("continuity store %s close failed (%s: %s)", self.backend, type(exc).__name__, exc)
        if self._queue:
            log.warning(
                "continuity store %s: %d failed writes are lost at shutdown", self.backend, len(self._queue)
            )
            self._report("retry", "dropped", len(self._queue))
            self._queue.clear()
            self._queued_bytes = 0
