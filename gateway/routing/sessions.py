"""Session affinity (`affinity = "session"`): a conversation stays on the target that served its
previous turn while that target is healthy, so the provider's prompt cache for it stays warm.
Round robin and weighted groups then spread sessions, not turns.

The memory is per process (a bounded TTL/LRU map from (model group, session key) to the target
that served). Replicas behind a load balancer do not share it; one that has not seen a session
finds its target in the transcript instead: the issuer of the latest continuity data in its
assistant turns (signatures, encrypted reasoning, native tool ids, ...), which the continuity
store or the client hands back (routing.affinity.last_issuer). For conversations without any
(plain OpenAI chat text), route a session to one replica at the load balancer (hash of
X-Session-Id) to keep it on one target across replicas.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cachetools import TTLCache

from gateway.transcript.target import Target

# reasons of gateway_affinity_breaks_total
UNHEALTHY = "unhealthy"  # the session's target failed this request; another one served it
COOLDOWN = "cooldown"  # the session's target was cooling down, so it was not tried
CAPABILITY = "capability"  # the session's target cannot serve this request (encode error)

DEFAULT_MAX_SESSIONS = 100_000
DEFAULT_TTL_SECONDS = 24 * 3600.0


class SessionMemory:
    """(model group, session key) -> (provider, upstream model) of the target that last served."""

    def __init__(
        self,
        maxsize: int = DEFAULT_MAX_SESSIONS,
        ttl: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._served: TTLCache[tuple[str, str], tuple[str, str]] = TTLCache(maxsize, ttl, timer=clock)

    def target(self, model: str, session: str, targets: tuple[Target, ...]) -> Target | None:
        served = self._served.get((model, session))
        if served is None:
            return None
        return next((t for t in targets if (t.provider, t.model) == served), None)

    def served(self, model: str, session: str, target: Target) -> None:
        self._served[(model, session)] = (target.provider, target.model)

    def __len__(self) -> int:
        return len(self._served)
