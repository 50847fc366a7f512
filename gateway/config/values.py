"""The checked value types of the configuration's fields: names, environment variable names,
URLs, Host names and origins, durations and prices (each mistake worded for its key path)."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

# Names become metric label values and client-facing model names; "/" is reserved for the
# "<provider>/<model>" direct addressing form.
_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REDIS_SCHEMES = ("redis", "rediss", "unix")


def _check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise PydanticCustomError(
            "invalid_name",
            "invalid name: use only letters, digits, '_', '.' and '-'"
            " ('/' is reserved for <provider>/<model>)",
        )
    return value


def _check_env_name(value: str) -> str:
    # Never echo the value: a pasted API key here would otherwise land in logs.
    if not _ENV_NAME_RE.fullmatch(value):
        raise PydanticCustomError(
            "invalid_env_name",
            "must be the NAME of an environment variable (letters, digits, '_'; not starting with a digit),"
            " never the secret itself",
        )
    return value


def check_base_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError as exc:
        raise PydanticCustomError("invalid_url", "not a valid URL: {reason}", {"reason": str(exc)}) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise PydanticCustomError("invalid_url", "must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise PydanticCustomError(
            "invalid_url", "must not contain credentials; name the key's variable in api_key_env instead"
        )
    if parts.query or parts.fragment:
        raise PydanticCustomError(
            "invalid_url", "must not have a query or fragment (request paths are appended to it)"
        )
    # Request paths are appended as "/v1/messages" etc.; a trailing slash would double it.
    return value.rstrip("/")


def _check_redis_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in _REDIS_SCHEMES or not (parts.netloc or parts.path):
        raise PydanticCustomError("invalid_url", "must be a redis://, rediss:// or unix:// URL")
    return value


Name = Annotated[str, AfterValidator(_check_name)]
EnvName = Annotated[str, AfterValidator(_check_env_name)]
BaseUrl = Annotated[str, AfterValidator(check_base_url)]
RedisUrl = Annotated[str, AfterValidator(_check_redis_url)]


def _check_allowed_host(value: str) -> str:
    # a name as it appears in a Host header, without its port: "gateway.internal", ".example.com"
    # (that domain and every subdomain) or "*" (any: the check is off)
    name = value.lower()
    if name != "*" and not _HOST_NAME_RE.fullmatch(name):
        raise PydanticCustomError(
            "invalid_host",
            "must be a host name without port or scheme, '.domain' for a domain and its subdomains, or '*'",
        )
    return name


def _check_origin(value: str) -> str:
    # an origin exactly as a browser sends it: scheme://host[:port], no path (an editor's webview
    # sends its own scheme: vscode-webview://<id>)
    parts = urlsplit(value)
    if (
        not parts.scheme
        or not parts.netloc
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username is not None
    ):
        raise PydanticCustomError(
            "invalid_origin", "must be an origin: scheme://host[:port], nothing after it"
        )
    return value.lower()


_HOST_NAME_RE = re.compile(r"\.?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")
AllowedHost = Annotated[str, AfterValidator(_check_allowed_host)]
Origin = Annotated[str, AfterValidator(_check_origin)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
USD = Annotated[float, Field(ge=0, allow_inf_nan=False)]
