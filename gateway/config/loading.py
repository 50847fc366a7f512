"""Loading a config: the TOML file, then the environment and command-line flags layered over it
(flags > environment > file > defaults), validated with every mistake named by its key path (and
by where an overridden value came from)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.config.schema import (
    DEFAULT_CONFIG_PATH,
    ConfigError,
    CrossCheckFailed,
    GatewayConfig,
    Loc,
    key_path,
)


def _validation_lines(exc: ValidationError, source: str, origins: Mapping[Loc, str]) -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        loc: Loc = err["loc"]
        if loc and loc[-1] == "[key]":  # a bad table name: the path already shows it
            loc = loc[:-1]
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(_line(source, loc, msg, origins))
    return lines


def _line(source: str, loc: Loc, msg: str, origins: Mapping[Loc, str]) -> str:
    origin = origins.get(loc)
    suffix = f" (from {origin})" if origin else ""
    return f"{source}: {key_path(loc)}: {msg}{suffix}" if loc else f"{source}: {msg}{suffix}"


def _validate(data: Mapping[str, Any], source: str, origins: Mapping[Loc, str]) -> GatewayConfig:
    try:
        return GatewayConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(*_validation_lines(exc, source, origins)) from None
    except CrossCheckFailed as exc:
        raise ConfigError(*(_line(source, loc, msg, origins) for loc, msg in exc.issues)) from None


def config_from_dict(data: Mapping[str, Any], *, source: str = "<config>") -> GatewayConfig:
    """Validate an in-memory config (same shape as the TOML file)."""
    return _validate(data, source, {})


def _read_toml(source: str, chosen_by: str | None) -> dict[str, Any]:
    how = f" (from {chosen_by})" if chosen_by else ""
    try:
        raw = Path(source).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{source}: config file not found{how}") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read config file{how}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not valid UTF-8 (byte offset {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: TOML syntax error: {exc}") from None


def _env_port(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"GATEWAY_PORT: must be an integer port number, got {value!r}") from None


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    workers: int | None = None,
    log_level: str | None = None,
    env: Mapping[str, str] | None = None,
) -> GatewayConfig:
    """Load the config file and layer the environment and command-line flags over it.

    Precedence, highest first: host/port/workers/log_level arguments > GATEWAY_HOST / GATEWAY_PORT /
    GATEWAY_LOG_LEVEL / GATEWAY_SIMULATORS_URL > the file > built-in defaults. The file is
    `path`, else $GATEWAY_CONFIG, else config/gateway.toml."""
    env = os.environ if env is None else env
    chosen_by = None
    if path is None:
        path = env.get("GATEWAY_CONFIG") or None
        chosen_by = "GATEWAY_CONFIG" if path else None
    source = os.fspath(path) if path is not None else DEFAULT_CONFIG_PATH
    data = _read_toml(source, chosen_by)

    overrides: list[tuple[str, Any, str]] = []
    if env_host := env.get("GATEWAY_HOST"):
        overrides.append(("host", env_host.strip(), "GATEWAY_HOST"))
    if env_port := env.get("GATEWAY_PORT"):
        overrides.append(("port", _env_port(env_port), "GATEWAY_PORT"))
    if env_level := env.get("GATEWAY_LOG_LEVEL"):
        overrides.append(("log_level", env_level.strip().lower(), "GATEWAY_LOG_LEVEL"))
    if env_simulators := env.get("GATEWAY_SIMULATORS_URL"):
        overrides.append(("simulators_url", env_simulators.strip(), "GATEWAY_SIMULATORS_URL"))
    if host is not None:
        overrides.append(("host", host, "--host"))
    if port is not None:
        overrides.append(("port", port, "--port"))
    if workers is not None:
        overrides.append(("workers", workers, "--workers"))
    if log_level is not None:
        overrides.append(("log_level", log_level, "--log-level"))

    origins: dict[Loc, str] = {}
    data = _tracing_from_env(data, env, origins)
    server = data.get("server", {})
    # A non-table [server] is left for validation to report; overrides have nowhere to go.
    if overrides and isinstance(server, dict):
        server = dict(server)
        for key, value, origin in overrides:  # later entries win: flags come after env
            server[key] = value
            origins[("server", key)] = origin
        data = {**data, "server": server}
    return _validate(data, source, origins)


_TRUE = frozenset({"true", "1", "yes", "on"})


def _tracing_from_env(
    data: dict[str, Any], env: Mapping[str, str], origins: dict[Loc, str]
) -> dict[str, Any]:
    """The standard OTEL_* variables that decide what the gateway traces, over [tracing]:
    an OTLP endpoint variable turns tracing on (OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true
    turn it off), OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental picks the newest GenAI
    names, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true records message content. The
    rest of OTEL_* (endpoint, headers, service name, sampler...) the SDK reads itself."""
    changes: dict[str, tuple[Any, str]] = {}
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        if env.get(name, "").strip():
            changes["enabled"] = (True, name)
            break
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        changes["enabled"] = (False, "OTEL_TRACES_EXPORTER")
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        changes["enabled"] = (False, "OTEL_SDK_DISABLED")
    opt_in = {v.strip() for v in env.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")}
    if "gen_ai_latest_experimental" in opt_in:
        changes["semconv"] = ("latest", "OTEL_SEMCONV_STABILITY_OPT_IN")
    capture = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower()
    if capture:
        changes["capture_content"] = (capture in _TRUE, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    tracing = data.get("tracing", {})
    if not changes or not isinstance(tracing, dict):
        return data
    tracing = dict(tracing)
    for key, (value, origin) in changes.items():
        tracing[key] = value
        origins[("tracing", key)] = origin
    return {**data, "tracing": tracing}


def model_names(config: GatewayConfig) -> list[str]:
    """Model group names clients can ask for, in config order."""
    return list(config.models)
