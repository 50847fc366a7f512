"""Named client keys: who is asking (by the token presented), which model groups they may use,
and their requests and tokens per minute and USD per day.

A request is admitted or refused once, before routing (`admit`): a model the key may not use is a
403, a limit already reached a 429 with `Retry-After` (the end of the minute, or of the UTC day
for the budget). What a request used is added when it ends (`spend`), so the request that crosses
a limit is served and the next ones are not. Counts live in the shared store (Redis) when the
continuity store is Redis, else in the process; a store failure lets the request through
(fail open) and is counted as a `limit` store operation with outcome `error`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gateway.config import GatewayConfig, KeyConfig
from gateway.ingress.errors import ClientError
from gateway.store.counters import Counters, MemoryCounters, RedisCounters

log = logging.getLogger("gateway")

LIMITED_REQUESTS = "limited_requests"
LIMITED_TOKENS = "limited_tokens"
LIMITED_BUDGET = "limited_budget"
FORBIDDEN_MODEL = "forbidden_model"


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int  # 403 or 429
    reason: str  # one of the constants above (the key metric's outcome)
    message: str
    retry_after: int | None = None

    def error(self) -> ClientError:
        """The client's answer, in whatever dialect's envelope the codec renders it."""
        if self.status == 403:
            return ClientError(
                403, self.message, type="permission_error", param="model", code="model_not_allowed"
            )
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after else {}
        return ClientError(429, self.message, type="rate_limit_error", code=self.reason, headers=headers)


class KeyLimits:
    """`tokens`: token -> key name (config.resolve_key_tokens); `tenant_of`: the tenant id the
    gateway derives from a presented token, so a request's key is found by the tenant it was
    admitted as, whichever header carried the token. `clock`: wall-clock seconds (the windows are
    calendar minutes and UTC days, the same on every replica)."""

    def __init__(
        self,
        config: GatewayConfig,
        tokens: Mapping[str, str],
        tenant_of: Callable[[str], str],
        counters: Counters | None = None,
        on_op: Callable[[str, str, str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._keys: dict[str, KeyConfig] = dict(config.keys)
        # looked up by tenant id: the tokens themselves are not kept
        self._by_tenant = {tenant_of(token): name for token, name in tokens.items()}
        if counters is None:
            shared = config.store.backend == "redis"
            counters = RedisCounters(config.store.url) if shared else MemoryCounters()
        self._counters = counters
        self._backend = "redis" if isinstance(counters, RedisCounters) else "memory"
        self._on_op = on_op
        self._clock = clock
        self._pending: set[asyncio.Task[None]] = set()

    def __bool__(self) -> bool:
        return bool(self._keys)

    def identify(self, tenant: str) -> str:
        """The key name of a request admitted as `tenant` ("" for none: an [auth] token)."""
        return self._by_tenant.get(tenant, "") if tenant else ""

    def _count(self, outcome: str) -> None:
        if self._on_op is not None:
            self._on_op(self._backend, "limit", outcome)

    def forbidden(self, name: str, model: str) -> Refusal | None:
        """A model group outside key `name`'s list (counted nowhere: count_tokens checks this only)."""
        key = self._keys.get(name)
        if key is None or key.models is None or model in key.models:
            return None
        return Refusal(403, FORBIDDEN_MODEL, f"key {name!r} may not use model {model!r}")

    async def admit(self, name: str, model: str) -> Refusal | None:
        """Refuse a request of key `name` for model group `model`, or let it through."""
        key = self._keys.get(name)
        if key is None:
            return None
        forbidden = self.forbidden(name, model)
        if forbidden is not None:
            return forbidden
        if not key.limited:
            return None
        now = self._clock()
        minute, day = int(now // 60), int(now // 86400)
        try:
            requests, tokens, usd = await self._counters.admit(name, minute, day)
        except Exception as exc:  # the store is down: serve (fail open), and count it
            log.warning("limit store unavailable, key %s not limited: %s", name, type(exc).__name__)
            self._count("error")
            return None
        self._count("ok")
        next_minute = max(1, math.ceil((minute + 1) * 60 - now))
        if key.requests_per_minute is not None and requests > key.requests_per_minute:
            message = f"key {name!r} is over its limit of {key.requests_per_minute} requests per minute"
            return Refusal(429, LIMITED_REQUESTS, message, next_minute)
        if key.tokens_per_minute is not None and tokens >= key.tokens_per_minute:
            message = f"key {name!r} is over its limit of {key.tokens_per_minute} tokens per minute"
            return Refusal(429, LIMITED_TOKENS, message, next_minute)
        if key.budget_usd_per_day is not None and usd >= key.budget_usd_per_day:
            message = f"key {name!r} has spent its budget of {key.budget_usd_per_day:g} USD for today (UTC)"
            return Refusal(429, LIMITED_BUDGET, message, max(1, math.ceil((day + 1) * 86400 - now)))
        return None

    def spend(self, name: str, tokens: int, usd: float | None) -> None:
        """Add what a finished request used (in the background: the answer is not held for it)."""
        key = self._keys.get(name)
        if key is None or not key.limited or (not tokens and not usd):
            return
        now = self._clock()
        task = asyncio.create_task(self._spend(name, int(now // 60), int(now // 86400), tokens, usd or 0.0))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _spend(self, name: str, minute: int, day: int, tokens: int, usd: float) -> None:
        try:
            await self._counters.spend(name, minute, day, tokens, usd)
        except Exception as exc:
            log.warning("limit store unavailable, usage of key %s not counted: %s", name, type(exc).__name__)
            self._count("error")

    async def close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self._counters.close()
