"""What a request cost in USD: the provider's price for the upstream model times the tokens the
provider reported.

Prices come from `genai-prices` (pydantic's price database: every family the gateway speaks,
cache read and write prices, tiered prices such as Claude's and Gemini's above 200k input tokens,
prices by date; its snapshot ships with the package, nothing is fetched at run time), overridden
per provider and upstream model by `[providers.<name>.prices."<model>"]` in the config. A model
neither knows has no price: its cost is None and is counted as unknown, never as 0.

Token counts follow the canonical `Usage` convention (input includes the cached part, output the
reasoning part), which is genai-prices' too: cache reads and writes are priced at the model's
cache prices, reasoning at the output price unless the model prices it apart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from gateway.config import GatewayConfig, PriceConfig
from gateway.transcript.model import Usage

log = logging.getLogger("gateway")

# provider kind -> genai-prices' provider id
PRICE_PROVIDERS = {
    "anthropic": "anthropic",
    "openai_responses": "openai",
    "openai_chat": "openai",
    "gemini": "google",
    "mistral": "mistral",
    "kimi": "moonshotai",
    "deepseek": "deepseek",
}
# prices change by date (the database holds their history): a looked-up price is kept this long
REFRESH_SECONDS = 3600.0
_MTOK = Decimal(1_000_000)

Pricer = Callable[[Usage], Decimal]


def override_pricer(price: PriceConfig) -> Pricer:
    """A configured price: cache reads and writes default to the input price, reasoning to the
    output price."""
    inp = Decimal(str(price.input_per_mtok))
    out = Decimal(str(price.output_per_mtok))
    read = inp if price.cache_read_per_mtok is None else Decimal(str(price.cache_read_per_mtok))
    write = inp if price.cache_write_per_mtok is None else Decimal(str(price.cache_write_per_mtok))
    reasoning = out if price.reasoning_per_mtok is None else Decimal(str(price.reasoning_per_mtok))

    def cost(u: Usage) -> Decimal:
        plain_in = max(0, u.input_tokens - u.cache_read_tokens - u.cache_write_tokens)
        plain_out = max(0, u.output_tokens - u.reasoning_tokens)
        return (
            plain_in * inp
            + u.cache_read_tokens * read
            + u.cache_write_tokens * write
            + plain_out * out
            + u.reasoning_tokens * reasoning
        ) / _MTOK

    return cost


class PriceBook:
    """Cost per request. `database(provider_id, model, when)` gives the price database's pricer
    for a model, or None when it does not know the model (injectable for tests)."""

    def __init__(
        self,
        config: GatewayConfig,
        database: Callable[[str, str, datetime], Pricer | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kinds = {name: p.kind for name, p in config.providers.items()}
        self._overrides = {
            (name, model): override_pricer(price)
            for name, p in config.providers.items()
            for model, price in p.prices.items()
        }
        self._database = database or genai_prices_pricer
        self._clock = clock
        self._found: dict[tuple[str, str], tuple[float, Pricer | None]] = {}

    def pricer(self, provider: str, model: str) -> Pricer | None:
        override = self._overrides.get((provider, model))
        if override is not None:
            return override
        kind = self._kinds.get(provider)
        if kind is None:
            return None
        key = (PRICE_PROVIDERS[kind], model)
        now = self._clock()
        found = self._found.get(key)
        if found is None or now - found[0] > REFRESH_SECONDS:
            try:
                pricer = self._database(key[0], model, datetime.now(UTC))
            except Exception:  # a database bug must not fail a request: the price is unknown
                log.exception("price lookup failed for %s %s", *key)
                pricer = None
            found = self._found[key] = (now, pricer)
        return found[1]

    def cost(self, provider: str, model: str, usage: Usage) -> float | None:
        """USD for `usage` on `provider`'s `model`; None when its price is unknown."""
        pricer = self.pricer(provider, model)
        if pricer is None:
            return None
        try:
            return float(pricer(usage))
        except Exception:
            log.exception("pricing %s %s failed", provider, model)
            return None


def genai_prices_pricer(provider_id: str, model: str, when: datetime) -> Pricer | None:
    """The database's price of `model` at `when`: a direct sum over its per-token rates when that
    gives exactly what genai-prices computes for the model (checked once, here, on probe usages
    below and above its price tiers), else genai-prices' own calculation for every request (the
    direct sum costs about 1 us; the library's several hundred, per answer)."""
    from genai_prices import data_snapshot

    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        return None
    price: Any = info.get_prices(when)
    library = library_pricer(price)
    direct = direct_pricer(price)
    if direct is None:
        return library
    for probe in _PROBES:
        try:
            expected = library(probe)
        except Exception:
            return library
        if abs(direct(probe) - expected) > max(Decimal("1e-12"), abs(expected) * Decimal("1e-9")):
            log.info("price of %s %s: the library's calculation is used for every answer", provider_id, model)
            return library
    return direct


def library_pricer(price: Any) -> Pricer:
    """genai-prices' own calculation for one of its model prices."""
    from genai_prices import Usage as PriceUsage

    def library(u: Usage) -> Decimal:
        counts = {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        }
        if u.reasoning_tokens:
            counts["output_reasoning_tokens"] = u.reasoning_tokens
        result: Decimal = price.calc_price(PriceUsage(**counts))["total_price"]
        return result

    return library


# usages the direct sum must price exactly as the library does: every token kind, below and
# above the 128k / 200k / 272k tiers providers use
_PROBES = (
    Usage(1000, 100, 200, 50, 30),
    Usage(7, 3),
    Usage(150_000, 4000, 60_000, 9000, 1000),
    Usage(250_000, 5000, 100_000, 20_000, 2000),
    Usage(600_000, 9000, 0, 300_000, 0),
)
# what the direct sum knows how to price; a model priced for anything else (a unit its usage
# might decompose into differently) goes through the library
_DIRECT_KEYS = frozenset(
    {
        "input_mtok",
        "output_mtok",
        "cache_read_mtok",
        "cache_write_mtok",
        "output_reasoning_mtok",
        "requests_kcount",
    }
)
# priced units no answer of the gateway reports (their count is always 0 here)
_UNREPORTED = ("audio", "image", "video", "search", "storage", "1h", "tool")


def direct_pricer(price: Any) -> Pricer | None:
    from genai_prices.types import TieredPrices

    keys = {k for k, v in vars(price).items() if v is not None and not k.startswith("_")}
    if any(k not in _DIRECT_KEYS and not any(word in k for word in _UNREPORTED) for k in keys):
        return None

    def rate(key: str) -> Callable[[int], Decimal] | None:
        value = getattr(price, key, None)
        if value is None:
            return None
        if isinstance(value, TieredPrices):
            tiers = sorted(((t.start, t.price) for t in value.tiers), reverse=True)
            base = value.base

            def tiered(total_input: int) -> Decimal:
                for start, tier_price in tiers:
                    if total_input > start:
                        return tier_price
                return base

            return tiered
        return lambda total_input: value

    inp, out = rate("input_mtok"), rate("output_mtok")
    read, write, reasoning = rate("cache_read_mtok"), rate("cache_write_mtok"), rate("output_reasoning_mtok")
    per_request = price.requests_kcount / 1000 if getattr(price, "requests_kcount", None) else Decimal(0)

    def cost(u: Usage) -> Decimal:
        n = u.input_tokens
        plain_in = n - (u.cache_read_tokens if read else 0) - (u.cache_write_tokens if write else 0)
        plain_out = u.output_tokens - (u.reasoning_tokens if reasoning else 0)
        total = plain_in * inp(n) if inp else Decimal(0)
        if out:
            total += plain_out * out(n)
        if read:
            total += u.cache_read_tokens * read(n)
        if write:
            total += u.cache_write_tokens * write(n)
        if reasoning:
            total += u.reasoning_tokens * reasoning(n)
        return total / _MTOK + per_request

    return cost


def preload() -> None:
    """Load the price database now (about half a second) rather than on the first request."""
    from genai_prices import data_snapshot

    data_snapshot.get_snapshot()
