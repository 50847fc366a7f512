"""Model groups -> the ordered list of targets to try for one request."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from gateway.config import GatewayConfig, ModelGroupConfig, RetryConfig, TargetConfig, TimeoutOverrides
from gateway.providers import get_adapter
from gateway.transcript.target import Target

# the metric label for a model name that is neither a group nor a configured provider
UNKNOWN_MODEL = "unknown"


# a direct address's (frozen) defaults, shared: the engine keeps what it derives from them by identity
_DEFAULT_RETRY = RetryConfig()
_NO_OVERRIDES = TimeoutOverrides()

# No group or direct address is longer; a longer `model` is refused without being looked at
MAX_MODEL_CHARS = 512


class UnknownModel(LookupError):
    pass


class InvalidModelName(ValueError):
    """A direct `<provider>/<model>` address whose model is no model name of the provider's
    family (its message says why, quoting at most the start of the name)."""


@dataclass(frozen=True, slots=True)
class Plan:
    model: str  # label-safe model name (a config name)
    targets: tuple[Target, ...]  # in the order to try them
    affinity: bool = False  # put the issuer of an open tool loop's tokens first (engine)
    sessions: bool = False  # keep a session on the target that served its previous turn (engine)
    retry: RetryConfig = _DEFAULT_RETRY
    timeouts: TimeoutOverrides = _NO_OVERRIDES
    overflow: Target | None = None  # where a request goes after a context-window overflow


def _target(config: GatewayConfig, group: ModelGroupConfig, t: TargetConfig) -> Target:
    provider = config.providers[t.provider]
    return Target(
        provider=t.provider,
        kind=provider.kind,
        model=t.model,
        base_url=provider.base_url,
        scope=provider.continuity_group or t.provider,
        thinking_budget=t.thinking_budget,
        reasoning_effort=t.reasoning_effort,
        pin_reasoning=bool(t.pin_reasoning),
        reasoning_policy=group.policy_for(t),
    )


class Router:
    def __init__(self, config: GatewayConfig, rng: random.Random | None = None) -> None:
        self._config = config
        self._rng = rng or random.Random()
        self._groups: dict[str, tuple[Target, ...]] = {}
        self._weights: dict[str, tuple[float, ...]] = {}
        self._counters: dict[str, itertools.count] = {}
        self._overflow: dict[str, Target] = {}
        for name, group in config.models.items():
            self._groups[name] = tuple(_target(config, group, t) for t in group.targets)
            if group.overflow_target is not None:
                self._overflow[name] = _target(config, group, group.overflow_target)
            self._weights[name] = tuple(t.weight for t in group.targets)
            self._counters[name] = itertools.count()
        # a group whose order never changes (failover, or one target) has one plan: made here,
        # once, instead of per request
        self._fixed: dict[str, Plan] = {
            name: self._plan(name, targets)
            for name, targets in self._groups.items()
            if config.models[name].strategy == "failover" or len(targets) == 1
        }

    def groups(self) -> dict[str, tuple[Target, ...]]:
        """Every model group's targets in config order."""
        return dict(self._groups)

    def plan(self, model: str) -> Plan:
        fixed = self._fixed.get(model)
        if fixed is not None:
            return fixed
        targets = self._groups.get(model)
        if targets is not None:
            return self._plan(model, self._order(model, targets))
        if len(model) > MAX_MODEL_CHARS:
            raise InvalidModelName(f"longer than {MAX_MODEL_CHARS} characters")
        provider_name, sep, upstream_model = model.partition("/")
        provider = self._config.providers.get(provider_name) if sep and upstream_model else None
        if provider is None:
            raise UnknownModel(model)
        problem = get_adapter(provider.kind).capabilities.model_names.problem(upstream_model)
        if problem is not None:
            raise InvalidModelName(
                f"{upstream_model[:40]!r}{'...' if len(upstream_model) > 40 else ''} is not a model"
                f" name of kind {provider.kind} ({problem})"
            )
        target = Target(
            provider=provider_name,
            kind=provider.kind,
            model=upstream_model,
            base_url=provider.base_url,
            scope=provider.continuity_group or provider_name,
        )
        # a direct address is labelled by its provider: client input never becomes a label value
        return Plan(provider_name, (target,))

    def _plan(self, model: str, order: tuple[Target, ...]) -> Plan:
        group = self._config.models[model]
        return Plan(
            model,
            order,
            affinity=group.affinity in ("issuer", "session"),
            sessions=group.affinity == "session",
            retry=group.retry,
            timeouts=group.timeouts,
            overflow=self._overflow.get(model),
        )

    def _order(self, name: str, targets: tuple[Target, ...]) -> tuple[Target, ...]:
        strategy = self._config.models[name].strategy
        if strategy == "failover" or len(targets) == 1:
            return targets
        if strategy == "round_robin":
            start = next(self._counters[name]) % len(targets)
            return targets[start:] + targets[:start]
        return self._weighted(targets, self._weights[name])

    def _weighted(self, targets: tuple[Target, ...], weights: tuple[float, ...]) -> tuple[Target, ...]:
        """A weighted random order without replacement (Efraimidis-Spirakis keys u^(1/w)): the
        first target is picked in proportion to its weight, and so are the fallbacks among the
        rest, so a cooling-down favourite spreads its share by weight too."""
        keys = [self._rng.random() ** (1.0 / w) for w in weights]
        order = sorted(range(len(targets)), key=keys.__getitem__, reverse=True)
        return tuple(targets[i] for i in order)
