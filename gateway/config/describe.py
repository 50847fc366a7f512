"""The resolved config rendered back as TOML (`gateway check-config`): it loads back to the same
config, and shows only whether each secret's variable is set, never its value."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel

from gateway.config.schema import GatewayConfig, TracingConfig, key_path, set_fields
from gateway.config.secrets import env_value


def _toml_value(value: Any) -> str:
    match value:
        case bool():
            return "true" if value else "false"
        case int() | float():
            return repr(value)
        case str():
            return orjson.dumps(value).decode()  # JSON string escapes are valid TOML basic strings
        case list():
            return "[" + ", ".join(_toml_value(item) for item in value) + "]"
        case dict():
            return "{ " + ", ".join(f"{key_path((k,))} = {_toml_value(v)}" for k, v in value.items()) + " }"
        case BaseModel():
            return _inline_table(value)
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _inline_table(model: BaseModel) -> str:
    return "{ " + ", ".join(f"{key_path((k,))} = {_toml_value(v)}" for k, v in set_fields(model)) + " }"


def _set_or_not(env: Mapping[str, str], name: str) -> str:
    return "set" if env_value(env, name) is not None else "NOT SET"


def describe(config: GatewayConfig, env: Mapping[str, str] | None = None) -> str:
    """The resolved config as TOML (it loads back to the same config). Secrets are never read into
    the text: only whether each named variable is set."""
    env = os.environ if env is None else env
    lines = ["# resolved gateway configuration (secrets are not shown, only whether they are set)"]

    def section(header: str, model: BaseModel, notes: Mapping[str, str] | None = None) -> None:
        lines.extend(("", f"[{header}]"))
        for name, value in set_fields(model):
            if value == {}:
                continue
            note = notes.get(name) if notes else None
            lines.append(f"{name} = {_toml_value(value)}" + (f"  # {note}" if note else ""))

    section("server", config.server)
    if config.auth is not None:
        status = ", ".join(f"{name} {_set_or_not(env, name)}" for name in config.auth.tokens_env)
        section("auth", config.auth, {"tokens_env": status})
    section("store", config.store)
    section("inspector", config.inspector)
    for name, provider in config.providers.items():
        section(
            key_path(("providers", name)),
            provider,
            {"api_key_env": _set_or_not(env, provider.api_key_env)},
        )
    for name, group in config.models.items():
        lines.extend(("", f"[{key_path(('models', name))}]"))
        lines.append(f"strategy = {_toml_value(group.strategy)}")
        lines.append(f"reasoning_policy = {_toml_value(group.reasoning_policy)}")
        if group.affinity != "none":
            lines.append(f"affinity = {_toml_value(group.affinity)}")
        lines.append("targets = [")
        lines.extend(f"  {_inline_table(target)}," for target in group.targets)
        lines.append("]")
        if group.overflow_target is not None:
            lines.append(f"overflow_target = {_inline_table(group.overflow_target)}")
        section(key_path(("models", name, "retry")), group.retry)
        if any(True for _ in set_fields(group.timeouts)):
            section(key_path(("models", name, "timeouts")), group.timeouts)
    for name, key in config.keys.items():
        section(key_path(("keys", name)), key, {"token_env": _set_or_not(env, key.token_env)})
    if config.tracing != TracingConfig():
        section("tracing", config.tracing)
    return "\n".join(lines) + "\n"
