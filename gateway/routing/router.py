"""Model groups -> the ordered list of targets to try for one request."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from gateway.config import GatewayConfig
from gateway.transcript.target import Target

# the metric label for a model name that is neither a group nor a configured provider
UNKNOWN_MODEL = "unknown"


class UnknownModel(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Plan:
    model: str  # label-safe model name (a config name)
    targets: tuple[Target, ...]


class Router:
    def __init__(self, config: GatewayConfig, rng: random.Random | None = None) -> None:
        self._config = config
        self._rng = rng or random.Random()
        self._groups: dict[str, tuple[Target, ...]] = {}
        self._weights: dict[str, tuple[float, ...]] = {}
        self._counters: dict[str, itertools.count] = {}
        for name, group in config.models.items():
            targets = []
            for t in group.targets:
                provider = config.providers[t.provider]
                targets.append(
                    Target(
                        provider=t.provider,
                        kind=provider.kind,
                        model=t.model,
                        base_url=provider.base_url,
                        scope=provider.continuity_group or t.provider,
                        thinking_budget=t.thinking_budget,
                        reasoning_effort=t.reasoning_effort,
                        reasoning_policy=group.policy_for(t),
                    )
                )
            self._groups[name] = tuple(targets)
            self._weights[name] = tuple(t.weight for t in group.targets)
            self._counters[name] = itertools.count()

    def plan(self, model: str) -> Plan:
        targets = self._groups.get(model)
        if targets is not None:
            return Plan(model, self._order(model, targets))
        provider_name, sep, upstream_model = model.partition("/")
        provider = self._config.providers.get(provider_name) if sep and upstream_model else None
        if provider is None:
            raise UnknownModel(model)
        target = Target(
            provider=provider_name,
            kind=provider.kind,
            model=upstream_model,
            base_url=provider.base_url,
            scope=provider.continuity_group or provider_name,
        )
        # a direct address is labelled by its provider: client input never becomes a label value
        return Plan(provider_name, (target,))

    def _order(self, name: str, targets: tuple[Target, ...]) -> tuple[Target, ...]:
        strategy = self._config.models[name].strategy
        if strategy == "failover" or len(targets) == 1:
            return targets
        if strategy == "round_robin":
            start = next(self._counters[name]) % len(targets)
        else:  # weighted: the first choice by weight, the rest stay as fallbacks in order
            start = self._rng.choices(range(len(targets)), weights=self._weights[name])[0]
        return targets[start:] + targets[:start]
