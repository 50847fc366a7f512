"""Per-target health: circuit breaking with a cooldown that grows on repeat, a single half-open
probe, Retry-After blocks, and out-of-service periods after auth and quota errors.

A target is one upstream model on one provider entry. Only failures that say something about the
target count: a request the provider rejected as invalid (400, 413, 422, a continuity rejection)
is the request's fault and leaves the target's health alone.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, MutableMapping

from cachetools import LRUCache
from msgspec import Struct

from gateway.config import CooldownConfig, GatewayConfig
from gateway.transcript.events import RETRYABLE_CATEGORIES, ErrorCategory, UpstreamError
from gateway.transcript.target import Target

TargetKey = tuple[str, str]  # (provider entry name, upstream model)

# the target cannot serve anyone until an operator (or the provider's billing) acts
OUT_OF_SERVICE_CATEGORIES = frozenset({ErrorCategory.AUTH, ErrorCategory.PERMISSION, ErrorCategory.QUOTA})
# failures that count against a target's health
HEALTH_FAILURE_CATEGORIES = RETRYABLE_CATEGORIES | {ErrorCategory.PROTOCOL}
# blocks that mean "too many requests" (the client is told 429), as opposed to "unavailable" (503)
RATE_LIMITED_CATEGORIES = frozenset({ErrorCategory.RATE_LIMIT, ErrorCategory.QUOTA})


def target_key(target: Target) -> TargetKey:
    return (target.provider, target.model)


class Ticket(Struct, frozen=True, gc=False):
    """The right to send one request to a target, as granted by `Breaker.acquire`."""

    probe: bool  # this request is the half-open probe
    generation: int  # the circuit's trip count when it was granted


class Breaker:
    """The health of one target. Closed: traffic flows and outcomes are counted. Open: no traffic
    until `until`; after that exactly one request at a time (the half-open probe) may go, and its
    outcome closes the circuit or opens it again for twice as long. Outcomes of requests sent
    before the latest trip (stragglers) change nothing but an explicit Retry-After or outage."""

    __slots__ = (
        "consecutive",
        "failures",
        "generation",
        "level",
        "open",
        "outcomes",
        "probing",
        "reason",
        "settings",
        "streak",
        "ticket",
        "until",
    )

    def __init__(self, settings: CooldownConfig) -> None:
        self.settings = settings
        self.open = False
        self.probing = False  # the half-open probe is in flight
        self.generation = 0  # trips so far: tells a straggler from a current request
        self.until = 0.0  # no traffic before this clock value (trip, Retry-After, out of service)
        self.reason: ErrorCategory | None = None  # why the target is blocked
        self.level = 0  # trips since the target last proved healthy for a whole window
        self.consecutive = 0  # failures in a row
        self.streak = 0  # successes in a row
        self.outcomes: deque[bool] = deque(maxlen=settings.window)  # True: a failure
        self.failures = 0  # failures in `outcomes`
        self.ticket = Ticket(False, 0)  # the closed circuit's ticket of this generation

    def available(self, now: float) -> bool:
        return now >= self.until and not (self.open and self.probing)

    def acquire(self, now: float) -> Ticket | None:
        """Claim the right to send one request; an open circuit grants it to one probe at a time."""
        if not self.available(now):
            return None
        if self.open:
            self.probing = True
            return Ticket(True, self.generation)
        ticket = self.ticket
        if ticket.generation != self.generation:  # tickets are values: one per trip is enough
            ticket = self.ticket = Ticket(False, self.generation)
        return ticket

    def release(self, ticket: Ticket) -> None:
        """The request ended without a verdict on health (it was cancelled, or the provider
        rejected the request itself): if it was the probe, the next request may probe."""
        if self._is_probe(ticket):
            self.probing = False

    def success(self, ticket: Ticket) -> None:
        if ticket.generation != self.generation or (self.open and not self._is_probe(ticket)):
            return
        self._count(False)
        self.consecutive = 0
        self.streak += 1
        self.open = self.probing = False
        self.reason = None
        if self.streak >= self.settings.window:
            self.level = 0  # healthy for a whole window: the next trip starts small again

    def failure(self, ticket: Ticket, error: UpstreamError, now: float) -> None:
        category = error.category
        s = self.settings
        if category in OUT_OF_SERVICE_CATEGORIES:
            if self._is_probe(ticket):
                self.probing = False
            self.open = True
            self._block(now + s.out_of_service_seconds, category)
            return
        if category not in HEALTH_FAILURE_CATEGORIES:
            self.release(ticket)
            return
        if ticket.generation == self.generation:
            if self.open:
                if self._is_probe(ticket):  # the probe failed: cool down again, longer
                    self._trip(category, now)
            else:
                self._count(True)
                self.consecutive += 1
                self.streak = 0
                seen = len(self.outcomes)
                if self.consecutive >= s.consecutive_failures or (
                    seen >= s.min_samples and self.failures >= s.failure_rate * seen
                ):
                    self._trip(category, now)
        if error.retry_after is not None:
            self._block(now + error.retry_after, category)

    def _is_probe(self, ticket: Ticket) -> bool:
        return ticket.probe and self.probing and ticket.generation == self.generation

    def _trip(self, category: ErrorCategory, now: float) -> None:
        s = self.settings
        self.level += 1
        self.generation += 1
        cooldown = min(s.max_cooldown_seconds, s.cooldown_seconds * 2.0 ** min(self.level - 1, 62))
        self.open, self.probing = True, False
        self.outcomes.clear()  # a closed circuit starts counting afresh
        self.failures = self.consecutive = self.streak = 0
        self._block(now + cooldown, category)

    def _block(self, until: float, category: ErrorCategory) -> None:
        if until > self.until:
            self.until = until
            self.reason = category

    def _count(self, failed: bool) -> None:
        if len(self.outcomes) == self.outcomes.maxlen and self.outcomes[0]:
            self.failures -= 1
        self.outcomes.append(failed)
        self.failures += failed


# breakers kept for targets clients address directly ("<provider>/<model>"): the model name is
# client input, so that map is bounded (least recently used go first)
DIRECT_BREAKERS = 1024


class HealthBook:
    """Every target's Breaker, created on first use with its provider's cooldown settings."""

    def __init__(self, config: GatewayConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self.clock = clock
        self._configured = {
            (t.provider, t.model) for group in config.models.values() for t in group.all_targets()
        }
        self._breakers: dict[TargetKey, Breaker] = {}
        self._direct: LRUCache[TargetKey, Breaker] = LRUCache(maxsize=DIRECT_BREAKERS)

    def _map(self, key: TargetKey) -> MutableMapping[TargetKey, Breaker]:
        return self._breakers if key in self._configured else self._direct

    def breaker(self, target: Target) -> Breaker:
        key = target_key(target)
        book = self._map(key)
        found = book.get(key)
        if found is None:
            found = book[key] = Breaker(self._config.providers[target.provider].cooldown)
        return found

    def available(self, target: Target) -> bool:
        key = target_key(target)
        breaker = self._map(key).get(key)
        return breaker is None or breaker.available(self.clock())

    def acquire(self, target: Target) -> Ticket | None:
        return self.breaker(target).acquire(self.clock())

    def release(self, target: Target, ticket: Ticket) -> None:
        self.breaker(target).release(ticket)

    def record(self, target: Target, ticket: Ticket, error: UpstreamError | None) -> None:
        """The verdict of one request: None when the target served (reached the commit point)."""
        breaker = self.breaker(target)
        if error is None:
            breaker.success(ticket)
        else:
            breaker.failure(ticket, error, self.clock())

    def available_in(self, target: Target) -> float:
        """Seconds until the target can take traffic again (0 when it can now). A half-open
        target whose probe is in flight counts as blocked for its next cooldown step."""
        key = target_key(target)
        breaker = self._map(key).get(key)
        if breaker is None:
            return 0.0
        now = self.clock()
        if now < breaker.until:
            return breaker.until - now
        if breaker.open and breaker.probing:
            return breaker.settings.cooldown_seconds
        return 0.0

    def rate_limited(self, target: Target) -> bool:
        """Blocked because the provider said "too many requests" (429 / quota)."""
        key = target_key(target)
        breaker = self._map(key).get(key)
        return breaker is not None and breaker.reason in RATE_LIMITED_CATEGORIES

    def is_available(self, provider: str, model: str) -> bool:
        breaker = self._map((provider, model)).get((provider, model))
        return breaker is None or breaker.available(self.clock())
