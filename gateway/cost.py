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
    from genai_prices import Usage as PriceUsage
    from genai_prices import data_snapshot

    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        return None
    price: Any = info.get_prices(when)

    def cost(u: Usage) -> Decimal:
        counts = {
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        }
        if u.reasoning_tokens:
            counts["output_reasoning_tokens"] = u.reasoning_tokens
        return price.calc_price(PriceUsage(**counts))["total_price"]

    return cost


def preload() -> None:
    """Load the price database now (about half a second) rather than on the first request."""
    from genai_prices import data_snapshot

    data_snapshot.get_snapshot()
