"""Secrets the config names by their environment variables: provider keys (read at request
time), client tokens, the continuity secret, and every such value for redaction."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from gateway.config.schema import ConfigError, GatewayConfig, MissingApiKey, key_path


def env_value(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name, "").strip()
    return value or None


def resolve_api_key(config: GatewayConfig, provider: str, env: Mapping[str, str] | None = None) -> str:
    """The provider's API key, read from its api_key_env variable at request time."""
    env = os.environ if env is None else env
    entry = config.providers.get(provider)
    if entry is None:
        known = ", ".join(sorted(config.providers))
        raise ConfigError(f"{key_path(('providers', provider))}: unknown provider (known: {known})")
    value = env_value(env, entry.api_key_env)
    if value is None:
        raise MissingApiKey(
            f"{key_path(('providers', provider, 'api_key_env'))}: environment variable"
            f" {entry.api_key_env} is not set"
        )
    return value


def secret_values(config: GatewayConfig, env: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value the config names, as set now: what redaction must never let through."""
    env = os.environ if env is None else env
    names = [p.api_key_env for p in config.providers.values()]
    if config.auth is not None:
        names.extend(config.auth.tokens_env)
    if config.server.continuity_secret_env:
        names.append(config.server.continuity_secret_env)
    names.extend(key.token_env for key in config.keys.values())
    values = [v for v in (env_value(env, n) for n in names) if v]
    if config.store.backend == "redis":
        password = urlsplit(config.store.url).password
        if password:
            values.append(password)
    return values


def resolve_continuity_secret(config: GatewayConfig, env: Mapping[str, str] | None = None) -> bytes | None:
    """The configured continuity secret, or None (a random per-process key is used then)."""
    name = config.server.continuity_secret_env
    if name is None:
        return None
    value = env_value(os.environ if env is None else env, name)
    if not value:
        raise ConfigError(f"server.continuity_secret_env: environment variable {name} is not set")
    return value.encode()


def resolve_auth_tokens(config: GatewayConfig, env: Mapping[str, str] | None = None) -> list[str]:
    """Client bearer tokens from the [auth] tokens_env variables; every one must be set."""
    if config.auth is None:
        return []
    env = os.environ if env is None else env
    tokens: list[str] = []
    missing: list[str] = []
    for index, name in enumerate(config.auth.tokens_env):
        value = env_value(env, name)
        if value is None:
            missing.append(f"auth.tokens_env[{index}]: environment variable {name} is not set")
        else:
            tokens.append(value)
    if missing:
        raise ConfigError(*missing)
    return tokens


def resolve_key_tokens(config: GatewayConfig, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The named client keys' tokens (token -> key name) from their token_env variables; every
    one must be set, and no two keys may share a token."""
    env = os.environ if env is None else env
    tokens: dict[str, str] = {}
    problems: list[str] = []
    for name, key in config.keys.items():
        value = env_value(env, key.token_env)
        where = key_path(("keys", name, "token_env"))
        if value is None:
            problems.append(f"{where}: environment variable {key.token_env} is not set")
        elif value in tokens:
            problems.append(f"{where}: the same token as key {tokens[value]!r}")
        else:
            tokens[value] = name
    if problems:
        raise ConfigError(*problems)
    return tokens


def inspect_client(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """`gateway inspect`'s gateway URL and client token: $GATEWAY_URL (else the default address)
    and $GATEWAY_TOKEN (else none)."""
    env = os.environ if env is None else env
    return env.get("GATEWAY_URL") or "http://127.0.0.1:8787", env.get("GATEWAY_TOKEN", "")
