"""Fail-open wrapper: a store outage costs continuity (a miss), never a request.

Every operation is bounded by a timeout, every failure becomes a miss or a no-op, and every outcome
is reported once to `on_op(backend, op, outcome)` (the `gateway_store_operations_total` counter).
After a failure the wrapper can skip the backend for a short back-off, so a dead remote store does
not add its connect timeout to every request."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from gateway.store.base import ContinuityStore, StoreBusy, StoreFault

log = logging.getLogger(__name__)

OnOp = Callable[[str, str, str], None]  # (backend, op, outcome)

DEFAULT_OP_TIMEOUT_SECONDS = 1.0
# Closing may flush (SQLite checkpoints its WAL), which can take longer than one lookup.
DEFAULT_CLOSE_TIMEOUT_SECONDS = 5.0


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
    ) -> None:
        self.inner = inner
        self.backend: str = inner.backend
        self._on_op = on_op
        self._op_timeout = op_timeout_seconds
        self._close_timeout = close_timeout_seconds
        self.backoff_seconds = backoff_seconds
        self._clock = clock
        self._retry_at = 0.0  # clock value before which get/put are skipped

    def _report(self, op: str, outcome: str, times: int = 1) -> None:
        if self._on_op is None:
            return
        for _ in range(times):
            try:
                self._on_op(self.backend, op, outcome)
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
        log.warning(
            "continuity store %s %s failed (%s: %s); failing open", self.backend, op, type(exc).__name__, exc
        )
        return outcome

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        if self._backing_off():
            self._report("get", "error", len(keys))
            return [None] * len(keys)
        try:
            async with asyncio.timeout(self._op_timeout):
                values = await self.inner.get_many(keys)
            if len(values) != len(keys):
                raise ValueError(f"backend returned {len(values)} values for {len(keys)} keys")
        except Exception as exc:
            self._report("get", self._failed("get", exc), len(keys))
            return [None] * len(keys)
        hits = sum(value is not None for value in values)
        self._report("get", "hit", hits)
        self._report("get", "miss", len(keys) - hits)
        return values

    async def put(self, keys: Sequence[str], value: bytes) -> None:
        if not keys:
            return
        if self._backing_off():
            self._report("put", "error")
            return
        try:
            async with asyncio.timeout(self._op_timeout):
                await self.inner.put(keys, value)
        except Exception as exc:
            self._report("put", self._failed("put", exc))
            return
        self._report("put", "ok")

    async def ping(self) -> bool:
        try:
            async with asyncio.timeout(self._op_timeout):
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
        try:
            async with asyncio.timeout(self._close_timeout):
                await self.inner.close()
        except Exception as exc:
            log.warning("continuity store %s close failed (%s: %s)", self.backend, type(exc).__name__, exc)
