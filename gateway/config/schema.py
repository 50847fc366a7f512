"""The configuration schema: the TOML contract (DESIGN.md section 2) as pydantic models, and the
checks across sections (every mistake named by its key path)."""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import re
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from gateway.config.values import (
    USD,
    AllowedHost,
    BaseUrl,
    EnvName,
    Name,
    Origin,
    RedisUrl,
    Seconds,
    check_base_url,
)
from gateway.providers import FAMILIES, KINDS
from gateway.transcript.model import REASONING_EFFORTS
from gateway.transcript.reasoning import setting_problem

DEFAULT_CONFIG_PATH = "config/gateway.toml"

# the provider kinds are those of the family registry (gateway/providers/__init__.py)
PROVIDER_KINDS: tuple[str, ...] = KINDS
ProviderKind = Literal[KINDS]  # a Literal of a tuple is a Literal of its items
ReasoningPolicy = Literal["drop", "as_text"]
ReasoningEffort = Literal[REASONING_EFFORTS]  # the canonical levels (transcript.model)
Loc = tuple[str | int, ...]

_TOML_BARE_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")


class ConfigError(Exception):
    """A configuration mistake: one line per problem, each naming its key path."""

    def __init__(self, *lines: str) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


class MissingApiKey(ConfigError):
    """A provider's api_key_env variable is unset or empty when a request needs it."""


class CrossCheckFailed(ConfigError):
    """Raised from inside model validation; carries key paths so callers can add the file name and
    where an overridden value came from."""

    def __init__(self, issues: Sequence[tuple[Loc, str]]) -> None:
        self.issues = tuple(issues)
        super().__init__(*(f"{key_path(loc)}: {msg}" for loc, msg in self.issues))


def key_path(loc: Sequence[str | int]) -> str:
    """Dotted TOML key path: `models."gpt-5.1".targets[0].provider`."""
    out: list[str] = []
    for part in loc:
        if isinstance(part, int):
            out.append(f"[{part}]")
            continue
        key = part if _TOML_BARE_KEY_RE.fullmatch(part) else orjson.dumps(part).decode()
        out.append(f".{key}" if out else key)
    return "".join(out)


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Section(BaseModel):
    # strict: a quoted number or a boolean where a number belongs is a mistake in a hand-written file
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ServerConfig(_Section):
    host: str = Field("127.0.0.1", min_length=1)
    port: int = Field(8787, ge=1, le=65535)
    max_body_bytes: int = Field(33554432, gt=0)
    max_json_depth: int = Field(64, gt=0)
    # JSON values one body may hold (containers and list/object entries): parsing is linear in
    # it, so this bounds how long a body's parse holds the event loop (about 60 ms per million
    # values on one idle core); a body beyond it is refused unparsed (gateway/ingress/budget.py)
    max_json_values: int = Field(1000000, gt=0)
    shutdown_grace_seconds: float = Field(10.0, ge=0, allow_inf_nan=False)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # env var holding the key that authenticates continuity data handed to clients
    # (reasoning_details); replicas behind one load balancer need the same value
    continuity_secret_env: EnvName | None = None
    # the largest transcript one request may carry (400 beyond): messages, tool definitions, and
    # content blocks over all messages; every pass is linear, these bound how long one request
    # can hold the event loop
    max_messages: int = Field(20000, gt=0)
    max_tools: int = Field(2000, gt=0)
    max_blocks: int = Field(200000, gt=0)
    # memory for the transcript items already decoded, kept under the bytes the client sent
    # (gateway/ingress/memo.py): an agent's next turn decodes only what is new. 0 turns it off
    transcript_memo_mib: int = Field(32, ge=0)
    # a simulator hub (`python -m gateway.simulators`): every provider's base_url becomes this URL
    # plus the hub's path for its kind, so any config runs against the simulators unchanged
    # (GATEWAY_SIMULATORS_URL overrides)
    simulators_url: BaseUrl | None = None
    # -- connection limits and client timeouts (gateway/server.py, gateway/security.py) --
    # open client connections; past it a request gets 503 (lowered to fit the open-file limit)
    max_connections: int = Field(1024, gt=0)
    # a complete request head within this long of connecting or of the previous response
    # (slow heads and idle keep-alive connections are closed)
    header_timeout_seconds: Seconds = 30.0
    # the whole request body within this long of its head (else 408)
    body_timeout_seconds: Seconds = 60.0
    # a client that reads nothing of its answer for this long loses its connection
    write_timeout_seconds: Seconds = 60.0
    # after refusing a request whose body is unread (401, 408, 413...): drain at most this long
    # and this many bytes so the client can read the answer, then close
    linger_seconds: float = Field(5.0, ge=0, allow_inf_nan=False)
    linger_max_bytes: int = Field(67108864, ge=0)
    # -- processes and event loop (`gateway serve --workers`, the uvloop extra) --
    # worker processes sharing the port (SO_REUSEPORT); unset: one per CPU the process may use,
    # or 1 with the memory store (continuity kept in one process cannot be shared)
    workers: int | None = Field(None, ge=1, le=512)
    # "uvloop" needs the extra (pip install 'llm-transcript-gateway[uvloop]'); see gateway/eventloop.py
    event_loop: Literal["auto", "asyncio", "uvloop"] = "auto"
    # -- browsers (gateway/browser.py) --
    # Host header names served besides loopback names and IP addresses (DNS rebinding defence):
    # the names clients and a load balancer use to reach the gateway
    allowed_hosts: list[AllowedHost] = []
    # web origins whose pages may call the API (CORS); every other origin is refused with 403
    allowed_origins: list[Origin] = []


class AuthConfig(_Section):
    tokens_env: list[EnvName] = Field(min_length=1)
    # /metrics takes a token like every route; true serves it to loopback clients without one
    # (a Prometheus on the same host that has no token)
    metrics_from_loopback_without_token: bool = False


class InspectorConfig(_Section):
    # capture every request for /inspector and `gateway inspect` (in memory only, never on disk)
    enabled: bool = True
    # what the captures may hold in all (bodies, upstream requests, answers, plus a fixed
    # per-entry overhead); the oldest go first beyond it
    max_bytes: int = Field(33554432, gt=0)


class StoreConfig(_Section):
    backend: Literal["memory", "sqlite", "redis"] = "memory"
    path: str = Field(".gateway/continuity.db", min_length=1)
    url: RedisUrl = "redis://127.0.0.1:6379/0"
    ttl_seconds: int = Field(604800, gt=0)
    max_entries: int = Field(100000, gt=0)
    # memory and sqlite backends: what their entries may hold in all (values plus a fixed
    # per-entry overhead); beyond it the least recently used (sqlite: the oldest) of the tenant
    # holding the most go first
    max_bytes: int = Field(134217728, gt=0)
    # every backend: what one tenant's records may hold (values plus overhead); its own oldest go
    # first beyond it, so one tenant never evicts another's continuity
    tenant_max_bytes: int = Field(134217728, gt=0)
    # how many kept answers one previous_response_id chain may hold (each is read when continuing)
    max_chain_depth: int = Field(4096, gt=0)


class TimeoutConfig(_Section):
    connect_seconds: Seconds = 10.0
    first_token_seconds: Seconds = 60.0
    idle_seconds: Seconds = 120.0
    total_seconds: Seconds = 600.0


class TimeoutOverrides(_Section):
    """A model group's timeouts: each one set here replaces the provider's for this group."""

    connect_seconds: Seconds | None = None
    first_token_seconds: Seconds | None = None
    idle_seconds: Seconds | None = None
    total_seconds: Seconds | None = None

    def over(self, base: TimeoutConfig) -> TimeoutConfig:
        changes = dict(set_fields(self))
        return base.model_copy(update=changes) if changes else base


class CooldownConfig(_Section):
    """Circuit breaking for each of a provider's targets (provider + upstream model)."""

    consecutive_failures: int = Field(5, ge=1)  # this many failures in a row open the circuit
    failure_rate: float = Field(0.5, gt=0, le=1, allow_inf_nan=False)  # ...or this share of...
    window: int = Field(20, ge=1)  # ...the last `window` outcomes, once `min_samples` are known
    min_samples: int = Field(10, ge=1)
    cooldown_seconds: Seconds = 5.0  # first cooldown; it doubles on every repeat trip
    max_cooldown_seconds: Seconds = 300.0
    # 401/403 and quota errors: the target is out of service this long, then probed again
    out_of_service_seconds: Seconds = 300.0


class RetryConfig(_Section):
    """How one request retries once every available target of its group has failed."""

    max_retries: int = Field(2, ge=0, le=20)  # extra passes over the group's targets
    backoff_base_seconds: Seconds = 0.25
    # the longest single wait before a retry; a Retry-After longer than this is not waited out
    # (the client gets the 429/503 with that Retry-After instead)
    backoff_max_seconds: Seconds = 8.0
    # no attempt and no backoff starts later than this after the request arrived
    deadline_seconds: Seconds = 120.0
    # retry budget: each request earns `budget_ratio` retries, the group saves at most
    # `budget_burst`; a retry spends one (failing over to another target is free)
    budget_ratio: float = Field(0.2, ge=0, le=1, allow_inf_nan=False)
    budget_burst: float = Field(10.0, ge=0, allow_inf_nan=False)


class PriceConfig(_Section):
    """A model's price in USD per million tokens, replacing the price database's (a model it does
    not know, a negotiated price). Cache and reasoning prices default to what most providers
    charge for them: cache reads at the input price, cache writes at the input price, reasoning at
    the output price."""

    input_per_mtok: USD
    output_per_mtok: USD
    cache_read_per_mtok: USD | None = None
    cache_write_per_mtok: USD | None = None
    reasoning_per_mtok: USD | None = None


class ProviderConfig(_Section):
    kind: ProviderKind
    base_url: BaseUrl
    api_key_env: EnvName
    continuity_group: Name | None = None
    timeouts: TimeoutConfig = Field(default_factory=TimeoutConfig)
    cooldown: CooldownConfig = Field(default_factory=CooldownConfig)
    # upstream model name -> its price (gateway/cost.py); the price database covers the rest
    prices: dict[str, PriceConfig] = Field(default_factory=dict)


class TargetConfig(_Section):
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)
    thinking_budget: Annotated[int, Field(ge=1024)] | None = None
    reasoning_effort: ReasoningEffort | None = None
    # true: the two above win over the client's own reasoning choice (README "Reasoning")
    pin_reasoning: bool | None = None
    reasoning_policy: ReasoningPolicy | None = None


class ModelGroupConfig(_Section):
    strategy: Literal["failover", "round_robin", "weighted"] = "failover"
    targets: list[TargetConfig] = Field(min_length=1)
    reasoning_policy: ReasoningPolicy = "drop"
    # "issuer": a request inside an open tool loop goes first to the target that issued the
    # loop's continuity tokens (while it is available), whatever the strategy would pick
    # "session": besides that, a conversation stays on the target that served its previous turn
    # while it is healthy (its prompt cache stays warm); strategies then spread sessions
    affinity: Literal["none", "issuer", "session"] = "none"
    retry: RetryConfig = Field(default_factory=RetryConfig)
    timeouts: TimeoutOverrides = Field(default_factory=TimeoutOverrides)
    # a larger-context model a request goes to when the target that served it reported a
    # context-window overflow (before the client is told, in its own dialect's overflow form)
    overflow_target: TargetConfig | None = None

    def all_targets(self) -> list[TargetConfig]:
        return [*self.targets, self.overflow_target] if self.overflow_target is not None else self.targets

    def policy_for(self, target: TargetConfig) -> ReasoningPolicy:
        """The reasoning policy in force for one of this group's targets (its own wins)."""
        return target.reasoning_policy or self.reasoning_policy


class KeyConfig(_Section):
    """A named client key (gateway/limits.py): its token, what it may use, and its limits. Every
    limit is optional; a key without any is only identified (metrics per key)."""

    token_env: EnvName
    # model groups (or provider names, for direct <provider>/<model> addressing) it may use;
    # absent: every one
    models: list[str] | None = None
    requests_per_minute: int | None = Field(None, gt=0)
    tokens_per_minute: int | None = Field(None, gt=0)  # input + output tokens
    budget_usd_per_day: float | None = Field(None, gt=0, allow_inf_nan=False)  # UTC days

    @property
    def limited(self) -> bool:
        return (
            self.requests_per_minute is not None
            or self.tokens_per_minute is not None
            or self.budget_usd_per_day is not None
        )


class TracingConfig(_Section):
    """OpenTelemetry traces (gateway/tracing.py; the `otel` extra). The exporter, resource and
    sampler read their own standard variables (OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME,
    OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_BSP_*); `load_config` sets the fields below
    from OTEL_* variables too (see there)."""

    enabled: bool = False
    # the OTLP/HTTP traces URL (.../v1/traces); unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
    # OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else http://localhost:4318/v1/traces
    endpoint: BaseUrl | None = None
    # message content on the spans (gen_ai.input.messages / gen_ai.output.messages)
    capture_content: bool = False
    # "latest": the GenAI conventions' newest names (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental)
    semconv: Literal["default", "latest"] = "default"


class GatewayConfig(_Section):
    server: ServerConfig = Field(default_factory=ServerConfig)
    auth: AuthConfig | None = None
    store: StoreConfig = Field(default_factory=StoreConfig)
    inspector: InspectorConfig = Field(default_factory=InspectorConfig)
    providers: dict[Name, ProviderConfig] = Field(min_length=1)
    models: dict[Name, ModelGroupConfig] = Field(default_factory=dict)
    keys: dict[Name, KeyConfig] = Field(default_factory=dict)
    tracing: TracingConfig = Field(default_factory=TracingConfig)

    @property
    def authenticates(self) -> bool:
        """Clients must present a token: [auth] tokens or named client keys."""
        return self.auth is not None or bool(self.keys)

    @property
    def limited(self) -> bool:
        """Some client key has a limit or a budget (counted in a store every worker must share)."""
        return any(key.limited for key in self.keys.values())

    @model_validator(mode="before")
    @classmethod
    def _point_at_simulators(cls, data: Any) -> Any:
        server = data.get("server") if isinstance(data, dict) else None
        url = server.get("simulators_url") if isinstance(server, dict) else None
        providers = data.get("providers") if isinstance(data, dict) else None
        if not isinstance(url, str) or not isinstance(providers, dict):
            return data  # nothing to do, or validation reports what is wrong
        try:
            check_base_url(url)
        except PydanticCustomError:
            return data  # validation reports server.simulators_url itself
        hub = url.rstrip("/")
        rewritten = {
            name: {**entry, "base_url": hub + FAMILIES[entry["kind"]].simulator_path}
            if isinstance(entry, dict) and entry.get("kind") in FAMILIES
            else entry
            for name, entry in providers.items()
        }
        return {**data, "providers": rewritten}

    @model_validator(mode="after")
    def _cross_check(self) -> Self:
        issues = list(_cross_issues(self))
        if issues:
            raise CrossCheckFailed(issues)
        return self


def _cross_issues(config: GatewayConfig) -> Iterator[tuple[Loc, str]]:
    if config.auth is None and not config.keys and not is_loopback_host(config.server.host):
        yield ("server", "host"), f"refusing to bind {config.server.host} without [auth] tokens"
    yield from _process_issues(config.server, config.store)
    if config.limited and config.store.backend != "redis" and (config.server.workers or 1) > 1:
        yield (
            ("server", "workers"),
            f"{config.server.workers} worker processes cannot share the client keys' limits and budgets"
            ' outside redis: set [store] backend = "redis" (or run one worker)',
        )
    if config.tracing.enabled and not _installed("opentelemetry.sdk"):
        yield (
            ("tracing", "enabled"),
            "the OpenTelemetry SDK is not installed (pip install 'llm-transcript-gateway[otel]')",
        )
    targets = set(config.models) | set(config.providers)
    for name, key in config.keys.items():
        for index, model in enumerate(key.models or ()):
            if model not in targets:
                yield (
                    ("keys", name, "models", index),
                    f"unknown model group or provider {model!r}",
                )
    known = ", ".join(sorted(config.providers))
    for group_name, group in config.models.items():
        places: list[tuple[Loc, TargetConfig]] = [
            (("models", group_name, "targets", index), target) for index, target in enumerate(group.targets)
        ]
        if group.overflow_target is not None:
            places.append((("models", group_name, "overflow_target"), group.overflow_target))
        for loc, target in places:
            provider = config.providers.get(target.provider)
            if provider is None:
                yield (*loc, "provider"), f"unknown provider {target.provider!r} (known: {known})"
            elif problem := _model_name_problem(provider.kind, target.model):
                yield (*loc, "model"), f"not a model name of kind {provider.kind} ({problem})"
            elif found := _reasoning_problem(provider.kind, target):
                key, problem = found
                yield (*loc, key), f"{problem} (kind {provider.kind})"
    for name, provider in config.providers.items():
        cooldown = provider.cooldown
        if cooldown.min_samples > cooldown.window:
            yield (
                ("providers", name, "cooldown", "min_samples"),
                f"must not exceed window ({cooldown.window})",
            )
        if cooldown.cooldown_seconds > cooldown.max_cooldown_seconds:
            yield (
                ("providers", name, "cooldown", "cooldown_seconds"),
                f"must not exceed max_cooldown_seconds ({cooldown.max_cooldown_seconds:g})",
            )
    for group_name, group in config.models.items():
        if group.retry.backoff_base_seconds > group.retry.backoff_max_seconds:
            yield (
                ("models", group_name, "retry", "backoff_base_seconds"),
                f"must not exceed backoff_max_seconds ({group.retry.backoff_max_seconds:g})",
            )
    # Continuity tokens are only ever valid within one provider family.
    group_kinds: dict[str, tuple[str, str]] = {}
    for name, provider in config.providers.items():
        if provider.continuity_group is None:
            continue
        first = group_kinds.setdefault(provider.continuity_group, (name, provider.kind))
        if first[1] != provider.kind:
            yield (
                ("providers", name, "continuity_group"),
                f"group {provider.continuity_group!r} joins kind {provider.kind} with {first[1]}"
                f" ({key_path(('providers', first[0]))}); continuity is shared only within one kind",
            )


def _process_issues(server: ServerConfig, store: StoreConfig) -> Iterator[tuple[Loc, str]]:
    if server.workers is not None and server.workers > 1 and store.backend == "memory":
        yield (
            ("server", "workers"),
            f"{server.workers} worker processes need a continuity store they can share:"
            ' set [store] backend = "sqlite" or "redis" (the memory store lives inside one process)',
        )
    if server.event_loop == "uvloop" and importlib.util.find_spec("uvloop") is None:
        yield (
            ("server", "event_loop"),
            "uvloop is not installed (pip install 'llm-transcript-gateway[uvloop]')",
        )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def worker_count(config: GatewayConfig) -> int:
    """How many worker processes `gateway serve` runs: [server] workers, else one per CPU this
    process may run on, except with the memory store (always one)."""
    if config.server.workers is not None:
        return config.server.workers
    if config.store.backend == "memory":
        return 1
    if config.limited and config.store.backend != "redis":  # limits counted inside one process
        return 1
    return len(os.sched_getaffinity(0))


def _model_name_problem(kind: str, model: str) -> str | None:
    # each family's record holds its model-name rule as capability data
    return FAMILIES[kind].capabilities.model_names.problem(model)


def _reasoning_problem(kind: str, target: TargetConfig) -> tuple[str, str] | None:
    rule = FAMILIES[kind].capabilities.thinking
    return setting_problem(rule, target.model, target.thinking_budget, target.reasoning_effort)


def set_fields(model: BaseModel) -> Iterator[tuple[str, Any]]:
    for name in type(model).model_fields:
        value = getattr(model, name)
        if value is not None:  # TOML has no null: an unset option is simply absent
            yield name, value
