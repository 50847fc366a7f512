"""Gateway configuration: the TOML schema and its validation (`schema`), loading with flags and
environment layered over the file (`loading`), secret lookup (`secrets`), and the resolved config
rendered back as TOML (`describe`). This package is the only reader of the environment for
configuration or secrets; its public names are re-exported here."""

from gateway.config.describe import describe
from gateway.config.loading import config_from_dict, load_config, model_names
from gateway.config.schema import (
    DEFAULT_CONFIG_PATH,
    PROVIDER_KINDS,
    AuthConfig,
    ConfigError,
    CooldownConfig,
    GatewayConfig,
    MissingApiKey,
    ModelGroupConfig,
    ProviderConfig,
    ProviderKind,
    ReasoningEffort,
    ReasoningPolicy,
    RetryConfig,
    ServerConfig,
    StoreConfig,
    TargetConfig,
    TimeoutConfig,
    TimeoutOverrides,
    is_loopback_host,
    key_path,
    worker_count,
)
from gateway.config.secrets import (
    resolve_api_key,
    resolve_auth_tokens,
    resolve_continuity_secret,
    secret_values,
)

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "PROVIDER_KINDS",
    "AuthConfig",
    "ConfigError",
    "CooldownConfig",
    "GatewayConfig",
    "MissingApiKey",
    "ModelGroupConfig",
    "ProviderConfig",
    "ProviderKind",
    "ReasoningEffort",
    "ReasoningPolicy",
    "RetryConfig",
    "ServerConfig",
    "StoreConfig",
    "TargetConfig",
    "TimeoutConfig",
    "TimeoutOverrides",
    "config_from_dict",
    "describe",
    "is_loopback_host",
    "key_path",
    "load_config",
    "model_names",
    "resolve_api_key",
    "resolve_auth_tokens",
    "resolve_continuity_secret",
    "secret_values",
    "worker_count",
]
