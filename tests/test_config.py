"""Config schema, error messages with key paths, layering, secret handling and describe()."""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.config import (
    DEFAULT_CONFIG_PATH,
    PROVIDER_KINDS,
    ConfigError,
    GatewayConfig,
    MissingApiKey,
    config_from_dict,
    describe,
    load_config,
    model_names,
    resolve_api_key,
    resolve_auth_tokens,
    worker_count,
)
from gateway.simulators.base import BASE_PATHS

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
SECRET = "sk-planted-SECRET-value-0123456789"


def minimal(**top: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "providers": {
            "claude": {"kind": "anthropic", "base_url": "https://api.anthropic.com", "api_key_env": "A_KEY"},
            "gem": {
                "kind": "gemini",
                "base_url": "https://generativelanguage.googleapis.com",
                "api_key_env": "G_KEY",
            },
        },
        "models": {
            "smart": {
                "targets": [
                    {"provider": "claude", "model": "claude-sonnet-4-5", "thinking_budget": 4096},
                    {"provider": "gem", "model": "gemini-3-pro-preview"},
                ]
            }
        },
    }
    data.update(top)
    return data


def error_lines(data: dict[str, Any], source: str = "cfg.toml") -> list[str]:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, source=source)
    return str(info.value).splitlines()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


PROVIDERS_TOML = """
[providers.claude]
kind = "anthropic"
base_url = "https://api.anthropic.com"
api_key_env = "A_KEY"
"""


# --- shipped files ---------------------------------------------------------------------------


def test_shipped_gateway_toml_loads_with_one_provider_per_kind() -> None:
    config = load_config(CONFIG_DIR / "gateway.toml", env={})
    assert sorted(p.kind for p in config.providers.values()) == sorted(PROVIDER_KINDS)
    by_kind = {p.kind: p for p in config.providers.values()}
    assert {k: (p.base_url, p.api_key_env) for k, p in by_kind.items()} == {
        "anthropic": ("https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        "openai_responses": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
        "openai_chat": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
        "gemini": ("https://generativelanguage.googleapis.com", "GEMINI_API_KEY"),
        "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
        "kimi": ("https://api.moonshot.ai/v1", "MOONSHOT_API_KEY"),
        "deepseek": ("https://api.deepseek.com", "DEEPSEEK_API_KEY"),
    }
    assert config.server.host == "127.0.0.1" and config.auth is None
    smart = config.models["smart"]
    assert smart.strategy == "failover"
    assert [config.providers[t.provider].kind for t in smart.targets] == [
        "anthropic",
        "openai_responses",
        "gemini",
    ]
    assert config.models["fast"].strategy == "round_robin"
    assert config.models["reasoning"].strategy == "weighted"
    singles = [g.targets[0].provider for g in config.models.values() if len(g.targets) == 1]
    single = {config.providers[name].kind for name in singles}
    assert single == set(PROVIDER_KINDS)


def test_shipped_simulated_toml_points_every_kind_at_the_hub() -> None:
    config = load_config(CONFIG_DIR / "simulated.toml", env={})
    assert sorted(p.kind for p in config.providers.values()) == sorted(PROVIDER_KINDS)
    for provider in config.providers.values():
        assert provider.base_url == f"http://127.0.0.1:8799{BASE_PATHS[provider.kind]}"
        assert provider.api_key_env == "SIM_API_KEY"
    upstream = {
        (config.providers[t.provider].kind, t.model, t.thinking_budget)
        for g in config.models.values()
        for t in g.targets
    }
    assert {("anthropic", "claude-sonnet-4-5", 2048), ("gemini", "gemini-3-pro-preview", None)} <= upstream
    assert {m for _, m, _ in upstream} == {
        "claude-sonnet-4-5",
        "gpt-5.1",
        "gemini-3-pro-preview",
        "gpt-4.1",
        "mistral-medium-latest",
        "kimi-k2-thinking",
        "deepseek-reasoner",
    }
    shipped = load_config(CONFIG_DIR / "gateway.toml", env={})
    assert model_names(config) == model_names(shipped)
    assert list(config.providers) == list(shipped.providers)


# --- schema and defaults ---------------------------------------------------------------------


def test_defaults() -> None:
    config = config_from_dict(minimal())
    s = config.server
    assert (s.host, s.port, s.max_body_bytes, s.max_json_depth, s.shutdown_grace_seconds, s.log_level) == (
        "127.0.0.1",
        8787,
        33554432,
        64,
        10.0,
        "info",
    )
    st = config.store
    assert (st.backend, st.path, st.url, st.ttl_seconds, st.max_entries) == (
        "memory",
        ".gateway/continuity.db",
        "redis://127.0.0.1:6379/0",
        604800,
        100000,
    )
    t = config.providers["claude"].timeouts
    assert (t.connect_seconds, t.first_token_seconds, t.idle_seconds, t.total_seconds) == (10, 60, 120, 600)
    group = config.models["smart"]
    assert group.strategy == "failover" and group.reasoning_policy == "drop"
    assert group.targets[1].weight == 1.0 and group.targets[1].thinking_budget is None
    assert config.providers["claude"].continuity_group is None


def test_models_are_frozen() -> None:
    config = config_from_dict(minimal())
    with pytest.raises(ValidationError):
        config.server.port = 1  # type: ignore[misc]


def test_target_reasoning_policy_overrides_group() -> None:
    data = minimal()
    data["models"]["smart"]["reasoning_policy"] = "as_text"
    data["models"]["smart"]["targets"][1]["reasoning_policy"] = "drop"
    group = config_from_dict(data).models["smart"]
    assert [group.policy_for(t) for t in group.targets] == ["as_text", "drop"]


def test_base_url_trailing_slash_is_removed() -> None:
    data = minimal()
    data["providers"]["claude"]["base_url"] = "https://api.anthropic.com/"
    assert config_from_dict(data).providers["claude"].base_url == "https://api.anthropic.com"


def test_model_names_in_config_order() -> None:
    data = minimal()
    data["models"] = {"zeta": data["models"]["smart"], "alpha": data["models"]["smart"]}
    assert model_names(config_from_dict(data)) == ["zeta", "alpha"]


# --- one message per mistake, naming its key path ---------------------------------------------


def test_unknown_provider_in_target() -> None:
    data = minimal()
    data["models"]["smart"]["targets"][1]["provider"] = "gemx"
    assert error_lines(data) == [
        "cfg.toml: models.smart.targets[1].provider: unknown provider 'gemx' (known: claude, gem)"
    ]


def test_overflow_target_is_checked_like_a_target() -> None:
    data = minimal()
    data["models"]["smart"]["overflow_target"] = {"provider": "gemx", "model": "gemini-2.5-pro"}
    assert error_lines(data) == [
        "cfg.toml: models.smart.overflow_target.provider: unknown provider 'gemx' (known: claude, gem)"
    ]
    data["models"]["smart"]["overflow_target"] = {"provider": "gem", "model": "gemini-2.5-pro"}
    assert config_from_dict(data).models["smart"].overflow_target.model == "gemini-2.5-pro"


def test_non_loopback_host_requires_auth() -> None:
    assert error_lines(minimal(server={"host": "0.0.0.0"})) == [
        "cfg.toml: server.host: refusing to bind 0.0.0.0 without [auth] tokens"
    ]
    config = config_from_dict(minimal(server={"host": "0.0.0.0"}, auth={"tokens_env": ["GATEWAY_TOKEN"]}))
    assert config.auth is not None and config.auth.tokens_env == ["GATEWAY_TOKEN"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "localhost"])
def test_loopback_hosts_need_no_auth(host: str) -> None:
    assert config_from_dict(minimal(server={"host": host})).server.host == host


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.5", "example.com", "128.0.0.1"])
def test_other_hosts_need_auth(host: str) -> None:
    assert error_lines(minimal(server={"host": host})) == [
        f"cfg.toml: server.host: refusing to bind {host} without [auth] tokens"
    ]


def _with(path: tuple[Any, ...], key: str, value: Any) -> dict[str, Any]:
    data = minimal(server={}, store={}, auth={"tokens_env": ["T"]})
    data["providers"]["claude"]["timeouts"] = {}
    node: Any = data
    for part in path:
        node = node[part]
    node[key] = value
    return data


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((), "kindd"),
        (("server",), "server.kindd"),
        (("auth",), "auth.kindd"),
        (("store",), "store.kindd"),
        (("providers", "claude"), "providers.claude.kindd"),
        (("providers", "claude", "timeouts"), "providers.claude.timeouts.kindd"),
        (("models", "smart"), "models.smart.kindd"),
        (("models", "smart", "targets", 1), "models.smart.targets[1].kindd"),
    ],
)
def test_unknown_key_at_every_level(path: tuple[Any, ...], expected: str) -> None:
    assert error_lines(_with(path, "kindd", 1)) == [f"cfg.toml: {expected}: unknown key"]


@pytest.mark.parametrize(
    ("path", "key", "value", "expected"),
    [
        (("server",), "port", "8787", "server.port: Input should be a valid integer"),
        (("server",), "port", 0, "server.port: Input should be greater than or equal to 1"),
        (("server",), "port", 65536, "server.port: Input should be less than or equal to 65535"),
        (("server",), "max_body_bytes", 0, "server.max_body_bytes: Input should be greater than 0"),
        (
            ("server",),
            "log_level",
            "loud",
            "server.log_level: Input should be 'debug', 'info', 'warning' or 'error'",
        ),
        (("store",), "backend", "mongo", "store.backend: Input should be 'memory', 'sqlite' or 'redis'"),
        (("store",), "ttl_seconds", 0, "store.ttl_seconds: Input should be greater than 0"),
        (("store",), "url", "http://x", "store.url: must be a redis://, rediss:// or unix:// URL"),
        (
            ("auth",),
            "tokens_env",
            [],
            "auth.tokens_env: List should have at least 1 item after validation, not 0",
        ),
        (
            ("providers", "claude"),
            "kind",
            "bedrock",
            "providers.claude.kind: Input should be 'anthropic', 'openai_responses', 'openai_chat', "
            "'gemini', 'mistral', 'kimi' or 'deepseek'",
        ),
        (
            ("providers", "claude"),
            "base_url",
            "ftp://api.anthropic.com",
            "providers.claude.base_url: must be an http:// or https:// URL with a host",
        ),
        (
            ("providers", "claude"),
            "base_url",
            "https://user:pw@api.anthropic.com",
            "providers.claude.base_url: must not contain credentials;"
            " name the key's variable in api_key_env instead",
        ),
        (
            ("providers", "claude"),
            "base_url",
            "https://api.anthropic.com?x=1",
            "providers.claude.base_url: must not have a query or fragment (request paths are appended to it)",
        ),
        (
            ("providers", "claude", "timeouts"),
            "idle_seconds",
            0,
            "providers.claude.timeouts.idle_seconds: Input should be greater than 0",
        ),
        (
            ("models", "smart"),
            "strategy",
            "random",
            "models.smart.strategy: Input should be 'failover', 'round_robin' or 'weighted'",
        ),
        (
            ("models", "smart"),
            "targets",
            [],
            "models.smart.targets: List should have at least 1 item after validation, not 0",
        ),
        (
            ("models", "smart", "targets", 0),
            "thinking_budget",
            1023,
            "models.smart.targets[0].thinking_budget: Input should be greater than or equal to 1024",
        ),
        (
            ("models", "smart", "targets", 0),
            "weight",
            0,
            "models.smart.targets[0].weight: Input should be greater than 0",
        ),
        (
            ("models", "smart", "targets", 0),
            "reasoning_effort",
            "max",
            "models.smart.targets[0].reasoning_effort: Input should be 'none', 'minimal', 'low', 'medium', "
            "'high' or 'xhigh'",
        ),
        (
            ("models", "smart", "targets", 0),
            "reasoning_policy",
            "keep",
            "models.smart.targets[0].reasoning_policy: Input should be 'drop' or 'as_text'",
        ),
    ],
)
def test_field_mistakes_name_their_key_path(
    path: tuple[Any, ...], key: str, value: Any, expected: str
) -> None:
    assert error_lines(_with(path, key, value)) == [f"cfg.toml: {expected}"]


def test_api_key_env_must_be_a_name_and_the_value_is_never_echoed() -> None:
    lines = error_lines(_with(("providers", "claude"), "api_key_env", SECRET))
    assert len(lines) == 1
    prefix = "cfg.toml: providers.claude.api_key_env: must be the NAME of an environment variable"
    assert lines[0].startswith(prefix)
    assert SECRET not in lines[0]


def test_auth_tokens_env_entries_must_be_names() -> None:
    lines = error_lines(_with(("auth",), "tokens_env", ["OK", "9BAD"]))
    assert len(lines) == 1 and lines[0].startswith("cfg.toml: auth.tokens_env[1]: must be the NAME")


@pytest.mark.parametrize("section", ["providers", "models"])
def test_names_with_a_slash_are_rejected(section: str) -> None:
    data = minimal()
    data[section]["a/b"] = data[section].pop("claude" if section == "providers" else "smart")
    lines = error_lines(data)
    assert any(line.startswith(f'cfg.toml: {section}."a/b": invalid name') for line in lines), lines


def test_dotted_names_are_quoted_in_key_paths() -> None:
    data = minimal()
    data["models"]["gpt-5.1"] = {"targets": [{"provider": "nope", "model": "m"}]}
    assert error_lines(data) == [
        "cfg.toml: models.\"gpt-5.1\".targets[0].provider: unknown provider 'nope' (known: claude, gem)"
    ]


def test_continuity_group_is_per_kind() -> None:
    data = minimal()
    data["providers"]["claude"]["continuity_group"] = "shared"
    data["providers"]["gem"]["continuity_group"] = "shared"
    assert error_lines(data) == [
        "cfg.toml: providers.gem.continuity_group: group 'shared' joins kind gemini with anthropic"
        " (providers.claude); continuity is shared only within one kind"
    ]


def test_every_mistake_is_listed_one_per_line() -> None:
    data = minimal(server={"port": "x", "hots": "a"})
    data["providers"]["claude"]["kindd"] = "anthropic"
    assert error_lines(data) == [
        "cfg.toml: server.port: Input should be a valid integer",
        "cfg.toml: server.hots: unknown key",
        "cfg.toml: providers.claude.kindd: unknown key",
    ]


def test_cross_checks_are_all_listed() -> None:
    data = minimal(server={"host": "0.0.0.0"})
    data["models"]["smart"]["targets"][0]["provider"] = "x"
    data["models"]["smart"]["targets"][1]["provider"] = "y"
    assert error_lines(data) == [
        "cfg.toml: server.host: refusing to bind 0.0.0.0 without [auth] tokens",
        "cfg.toml: models.smart.targets[0].provider: unknown provider 'x' (known: claude, gem)",
        "cfg.toml: models.smart.targets[1].provider: unknown provider 'y' (known: claude, gem)",
    ]


def test_providers_are_required() -> None:
    assert error_lines({}) == ["cfg.toml: providers: Field required"]


def test_direct_construction_also_cross_checks() -> None:
    data = minimal()
    data["models"]["smart"]["targets"][0]["provider"] = "x"
    with pytest.raises(ConfigError, match=r"^models\.smart\.targets\[0\]\.provider: unknown provider 'x'"):
        GatewayConfig.model_validate(data)


# --- files, TOML syntax, layering ------------------------------------------------------------


def test_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(missing, env={})
    assert str(info.value) == f"{missing}: config file not found"


def test_missing_file_from_env_names_the_variable(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.toml")
    with pytest.raises(ConfigError) as info:
        load_config(env={"GATEWAY_CONFIG": missing})
    assert str(info.value) == f"{missing}: config file not found (from GATEWAY_CONFIG)"


def test_toml_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.toml", '[server]\nport = 8787\nhost "127.0.0.1"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert message.startswith(f"{path}: TOML syntax error: ")
    assert "(at line 3, column 6)" in message


def test_errors_from_a_file_are_prefixed_with_its_path(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", PROVIDERS_TOML.replace('kind = "anthropic"', 'kindd = "anthropic"'))
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value).splitlines() == [
        f"{path}: providers.claude.kind: Field required",
        f"{path}: providers.claude.kindd: unknown key",
    ]


def test_gateway_config_env_picks_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", "[server]\nport = 9001\n" + PROVIDERS_TOML)
    assert load_config(env={"GATEWAY_CONFIG": str(path)}).server.port == 9001


def test_explicit_path_beats_gateway_config_env(tmp_path: Path) -> None:
    explicit = write(tmp_path / "a.toml", "[server]\nport = 9001\n" + PROVIDERS_TOML)
    from_env = write(tmp_path / "b.toml", "[server]\nport = 9002\n" + PROVIDERS_TOML)
    assert load_config(explicit, env={"GATEWAY_CONFIG": str(from_env)}).server.port == 9001


def test_default_path_is_config_gateway_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / DEFAULT_CONFIG_PATH, "[server]\nport = 9003\n" + PROVIDERS_TOML)
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).server.port == 9003


@pytest.mark.parametrize(("in_file", "in_env", "in_flag"), list(itertools.product([False, True], repeat=3)))
def test_layering_flag_over_env_over_file_over_default(
    tmp_path: Path, in_file: bool, in_env: bool, in_flag: bool
) -> None:
    server = '[server]\nport = 9100\nhost = "127.0.0.2"\n' if in_file else ""
    path = write(tmp_path / "g.toml", server + PROVIDERS_TOML)
    env = {"GATEWAY_PORT": "9200", "GATEWAY_HOST": "127.0.0.3"} if in_env else {}
    flags: dict[str, Any] = {"port": 9300, "host": "127.0.0.4"} if in_flag else {}
    config = load_config(path, env=env, **flags)
    expected = (
        (9300, "127.0.0.4")
        if in_flag
        else (9200, "127.0.0.3")
        if in_env
        else (9100, "127.0.0.2")
        if in_file
        else (8787, "127.0.0.1")
    )
    assert (config.server.port, config.server.host) == expected
    # layering touches only the overridden keys
    assert config.providers["claude"].api_key_env == "A_KEY"


def test_log_level_from_env_over_file(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", '[server]\nlog_level = "warning"\n' + PROVIDERS_TOML)
    assert load_config(path, env={}).server.log_level == "warning"
    assert load_config(path, env={"GATEWAY_LOG_LEVEL": "DEBUG"}).server.log_level == "debug"


def test_empty_env_values_do_not_override(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", "[server]\nport = 9100\n" + PROVIDERS_TOML)
    assert load_config(path, env={"GATEWAY_PORT": "", "GATEWAY_HOST": ""}).server.port == 9100


def test_gateway_port_must_be_an_integer(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", PROVIDERS_TOML)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={"GATEWAY_PORT": "eighty"})
    assert str(info.value) == "GATEWAY_PORT: must be an integer port number, got 'eighty'"


def test_overridden_values_say_where_they_came_from(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", PROVIDERS_TOML)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={"GATEWAY_LOG_LEVEL": "loud", "GATEWAY_PORT": "70000"})
    assert str(info.value).splitlines() == [
        f"{path}: server.port: Input should be less than or equal to 65535 (from GATEWAY_PORT)",
        f"{path}: server.log_level: Input should be 'debug', 'info', 'warning' or 'error'"
        " (from GATEWAY_LOG_LEVEL)",
    ]
    with pytest.raises(ConfigError) as info:
        load_config(path, env={}, host="0.0.0.0")
    expected = f"{path}: server.host: refusing to bind 0.0.0.0 without [auth] tokens (from --host)"
    assert str(info.value) == expected


# --- secrets ---------------------------------------------------------------------------------


def test_resolve_api_key_reads_the_named_variable() -> None:
    config = config_from_dict(minimal())
    assert resolve_api_key(config, "claude", {"A_KEY": SECRET}) == SECRET


@pytest.mark.parametrize("env", [{}, {"A_KEY": ""}, {"A_KEY": "  "}])
def test_missing_api_key(env: dict[str, str]) -> None:
    config = config_from_dict(minimal())
    with pytest.raises(MissingApiKey) as info:
        resolve_api_key(config, "claude", {**env, "G_KEY": SECRET})
    assert isinstance(info.value, ConfigError)
    assert str(info.value) == "providers.claude.api_key_env: environment variable A_KEY is not set"


def test_resolve_api_key_unknown_provider() -> None:
    config = config_from_dict(minimal())
    with pytest.raises(ConfigError) as info:
        resolve_api_key(config, "nope", {})
    assert not isinstance(info.value, MissingApiKey)
    assert str(info.value) == "providers.nope: unknown provider (known: claude, gem)"


def test_resolve_auth_tokens() -> None:
    config = config_from_dict(minimal(auth={"tokens_env": ["T1", "T2", "T3"]}))
    assert resolve_auth_tokens(config, {"T1": "a", "T2": "b", "T3": "c"}) == ["a", "b", "c"]
    with pytest.raises(ConfigError) as info:
        resolve_auth_tokens(config, {"T2": "b"})
    assert str(info.value).splitlines() == [
        "auth.tokens_env[0]: environment variable T1 is not set",
        "auth.tokens_env[2]: environment variable T3 is not set",
    ]
    assert resolve_auth_tokens(config_from_dict(minimal()), {}) == []


# --- describe --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gateway.toml", "simulated.toml"])
def test_describe_never_shows_key_values(name: str) -> None:
    config = load_config(CONFIG_DIR / name, env={})
    env_names = {p.api_key_env for p in config.providers.values()}
    planted = {var: f"{SECRET}-{var}" for var in env_names}
    text = describe(config, planted)
    assert "SECRET" not in text
    for var in env_names:
        assert f'api_key_env = "{var}"  # set' in text
    assert "NOT SET" not in text
    unset = describe(config, {})
    assert unset.count("  # NOT SET") == len(config.providers)


def test_describe_shows_auth_variables_and_whether_set() -> None:
    config = config_from_dict(minimal(auth={"tokens_env": ["T1", "T2"]}, server={"host": "0.0.0.0"}))
    text = describe(config, {"T1": SECRET})
    assert SECRET not in text
    assert 'tokens_env = ["T1", "T2"]  # T1 set, T2 NOT SET' in text
    assert 'host = "0.0.0.0"' in text


def test_describe_lists_groups_strategies_and_targets() -> None:
    text = describe(load_config(CONFIG_DIR / "gateway.toml", env={}), {})
    block = text.split("[models.smart]\n", 1)[1].split("\n\n", 1)[0]
    assert block.splitlines() == [
        'strategy = "failover"',
        'reasoning_policy = "drop"',
        'affinity = "session"',
        "targets = [",
        '  { provider = "claude", model = "claude-sonnet-4-5", weight = 1.0, thinking_budget = 4096 },',
        '  { provider = "openai", model = "gpt-5.1", weight = 1.0, reasoning_effort = "medium" },',
        '  { provider = "gemini", model = "gemini-3-pro-preview", weight = 1.0, reasoning_effort = "low" },',
        "]",
    ]


@pytest.mark.parametrize("name", ["gateway.toml", "simulated.toml"])
def test_describe_is_toml_that_loads_back_to_the_same_config(name: str) -> None:
    config = load_config(CONFIG_DIR / name, env={})
    assert config_from_dict(tomllib.loads(describe(config, {}))) == config


def test_describe_round_trips_quoted_names_and_options() -> None:
    data = minimal(
        auth={"tokens_env": ["T"]},
        store={"backend": "redis", "url": "rediss://r:6380/1", "path": 'we"ird.db'},  # a quote to escape
    )
    data["providers"]["claude"]["continuity_group"] = "org.1"
    data["providers"]["claude"]["timeouts"] = {"connect_seconds": 2.5}
    data["models"]["gpt-5.1"] = {
        "strategy": "weighted",
        "reasoning_policy": "as_text",
        "targets": [
            {"provider": "gem", "model": "models/gemini-2.5-pro", "weight": 3, "reasoning_policy": "drop"}
        ],
    }
    config = config_from_dict(data)
    text = describe(config, {})
    assert '[models."gpt-5.1"]' in text
    assert config_from_dict(tomllib.loads(text)) == config


def test_non_utf8_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_bytes(b'[server]\nhost = "\xff"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value) == f"{path}: not valid UTF-8 (byte offset 17)"


def test_booleans_are_not_numbers() -> None:
    assert error_lines(minimal(server={"port": True})) == [
        "cfg.toml: server.port: Input should be a valid integer"
    ]


# --- routing and resilience options ----------------------------------------------------------


def test_routing_defaults() -> None:
    config = config_from_dict(minimal())
    c = config.providers["claude"].cooldown
    assert (c.consecutive_failures, c.failure_rate, c.window, c.min_samples) == (5, 0.5, 20, 10)
    assert (c.cooldown_seconds, c.max_cooldown_seconds, c.out_of_service_seconds) == (5, 300, 300)
    group = config.models["smart"]
    r = group.retry
    assert (r.max_retries, r.backoff_base_seconds, r.backoff_max_seconds, r.deadline_seconds) == (
        2,
        0.25,
        8,
        120,
    )
    assert (r.budget_ratio, r.budget_burst) == (0.2, 10)
    assert group.affinity == "none"
    assert group.timeouts.over(config.providers["claude"].timeouts) == config.providers["claude"].timeouts


def test_group_timeouts_override_only_what_they_set() -> None:
    data = minimal()
    data["providers"]["claude"]["timeouts"] = {"idle_seconds": 30}
    data["models"]["smart"]["timeouts"] = {"first_token_seconds": 5}
    config = config_from_dict(data)
    merged = config.models["smart"].timeouts.over(config.providers["claude"].timeouts)
    assert (
        merged.connect_seconds,
        merged.first_token_seconds,
        merged.idle_seconds,
        merged.total_seconds,
    ) == (
        10,
        5,
        30,
        600,
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("providers", "claude", "cooldown"), "providers.claude.cooldown.kindd"),
        (("models", "smart", "retry"), "models.smart.retry.kindd"),
        (("models", "smart", "timeouts"), "models.smart.timeouts.kindd"),
    ],
)
def test_unknown_key_in_routing_tables(path: tuple[Any, ...], expected: str) -> None:
    data = minimal()
    data["providers"]["claude"]["cooldown"] = {}
    data["models"]["smart"]["retry"] = {}
    data["models"]["smart"]["timeouts"] = {}
    node: Any = data
    for part in path:
        node = node[part]
    node["kindd"] = 1
    assert error_lines(data) == [f"cfg.toml: {expected}: unknown key"]


@pytest.mark.parametrize(
    ("path", "key", "value", "expected"),
    [
        (
            ("models", "smart"),
            "affinity",
            "sticky",
            "models.smart.affinity: Input should be 'none', 'issuer' or 'session'",
        ),
        (
            ("models", "smart", "retry"),
            "max_retries",
            -1,
            "models.smart.retry.max_retries: Input should be greater than or equal to 0",
        ),
        (
            ("models", "smart", "retry"),
            "deadline_seconds",
            0,
            "models.smart.retry.deadline_seconds: Input should be greater than 0",
        ),
        (
            ("models", "smart", "timeouts"),
            "first_token_seconds",
            0,
            "models.smart.timeouts.first_token_seconds: Input should be greater than 0",
        ),
        (
            ("providers", "claude", "cooldown"),
            "failure_rate",
            1.5,
            "providers.claude.cooldown.failure_rate: Input should be less than or equal to 1",
        ),
        (
            ("providers", "claude", "cooldown"),
            "consecutive_failures",
            0,
            "providers.claude.cooldown.consecutive_failures: Input should be greater than or equal to 1",
        ),
    ],
)
def test_routing_mistakes_name_their_key_path(
    path: tuple[Any, ...], key: str, value: Any, expected: str
) -> None:
    data = minimal()
    data["providers"]["claude"]["cooldown"] = {}
    data["models"]["smart"]["retry"] = {}
    data["models"]["smart"]["timeouts"] = {}
    node: Any = data
    for part in path:
        node = node[part]
    node[key] = value
    assert error_lines(data) == [f"cfg.toml: {expected}"]


def test_routing_cross_checks() -> None:
    data = minimal()
    data["providers"]["claude"]["cooldown"] = {
        "window": 5,
        "min_samples": 6,
        "cooldown_seconds": 50.0,
        "max_cooldown_seconds": 10.0,
    }
    data["models"]["smart"]["retry"] = {"backoff_base_seconds": 9.0, "backoff_max_seconds": 2.0}
    assert error_lines(data) == [
        "cfg.toml: providers.claude.cooldown.min_samples: must not exceed window (5)",
        "cfg.toml: providers.claude.cooldown.cooldown_seconds: must not exceed max_cooldown_seconds (10)",
        "cfg.toml: models.smart.retry.backoff_base_seconds: must not exceed backoff_max_seconds (2)",
    ]


def test_describe_round_trips_routing_options() -> None:
    data = minimal()
    data["providers"]["claude"]["cooldown"] = {"consecutive_failures": 2, "cooldown_seconds": 1.5}
    data["models"]["smart"].update(
        strategy="round_robin",
        affinity="issuer",
        retry={"max_retries": 0, "deadline_seconds": 30.0},
        timeouts={"first_token_seconds": 4.0},
    )
    config = config_from_dict(data)
    text = describe(config, {})
    assert 'affinity = "issuer"' in text
    assert "[models.smart.retry]\nmax_retries = 0\n" in text
    assert "[models.smart.timeouts]\nfirst_token_seconds = 4.0\n" in text
    assert config_from_dict(tomllib.loads(text)) == config


def test_the_continuity_secret_is_read_from_its_env_var_and_must_be_set_when_named():
    from gateway.config import resolve_continuity_secret, secret_values

    data = {
        "server": {"continuity_secret_env": "GW_SECRET"},
        "providers": {"p": {"kind": "openai_chat", "base_url": "http://x/v1", "api_key_env": "K"}},
    }
    config = config_from_dict(data)
    assert resolve_continuity_secret(config, {"GW_SECRET": "s3cret"}) == b"s3cret"
    assert "s3cret" in secret_values(config, {"GW_SECRET": "s3cret", "K": "k"})
    with pytest.raises(
        ConfigError, match="server.continuity_secret_env: environment variable GW_SECRET is not set"
    ):
        resolve_continuity_secret(config, {})
    del data["server"]
    assert resolve_continuity_secret(config_from_dict(data), {}) is None


def test_target_models_must_be_model_names_of_the_providers_family() -> None:
    data = minimal()
    data["models"]["smart"]["targets"][1]["model"] = "gemini-3-pro:streamGenerateContent"
    data["models"]["smart"]["targets"][0]["model"] = "claude sonnet"
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    assert str(info.value).splitlines() == [
        "<config>: models.smart.targets[0].model: not a model name of kind anthropic"
        " (does not match [A-Za-z0-9][A-Za-z0-9._-]*)",
        "<config>: models.smart.targets[1].model: not a model name of kind gemini"
        " (does not match (?:models/)?[A-Za-z0-9][A-Za-z0-9._-]*)",
    ]


def test_simulators_url_points_every_provider_at_the_hub_and_the_environment_overrides_it(
    tmp_path: Path,
) -> None:
    from gateway.simulators.base import BASE_PATHS

    path = tmp_path / "g.toml"
    path.write_text(
        '[server]\nsimulators_url = "http://127.0.0.1:9001"\n'
        '[providers.claude]\nkind = "anthropic"\nbase_url = "https://api.anthropic.com"\napi_key_env = "A"\n'
        '[providers.ds]\nkind = "deepseek"\nbase_url = "https://api.deepseek.com"\napi_key_env = "D"\n'
    )
    config = load_config(path, env={})
    assert config.providers["claude"].base_url == "http://127.0.0.1:9001" + BASE_PATHS["anthropic"]
    assert config.providers["ds"].base_url == "http://127.0.0.1:9001" + BASE_PATHS["deepseek"]
    moved = load_config(path, env={"GATEWAY_SIMULATORS_URL": "http://127.0.0.1:9002/"})
    assert moved.providers["ds"].base_url == "http://127.0.0.1:9002/deepseek/v1"
    assert config_from_dict(tomllib.loads(describe(moved, {}))) == moved
    with pytest.raises(ConfigError) as info:
        load_config(path, env={"GATEWAY_SIMULATORS_URL": "nowhere"})
    assert str(info.value).splitlines() == [
        f"{path}: server.simulators_url: must be an http:// or https:// URL with a host"
        " (from GATEWAY_SIMULATORS_URL)"
    ]


# --- worker processes and the event loop -------------------------------------------------------


def test_several_workers_need_a_shared_store() -> None:
    assert error_lines(minimal(server={"workers": 2})) == [
        "cfg.toml: server.workers: 2 worker processes need a continuity store they can share:"
        ' set [store] backend = "sqlite" or "redis" (the memory store lives inside one process)'
    ]
    for backend in ("sqlite", "redis"):
        assert (
            config_from_dict(minimal(server={"workers": 2}, store={"backend": backend})).server.workers == 2
        )
    assert config_from_dict(minimal(server={"workers": 1})).server.workers == 1  # memory, one process


def test_workers_flag_is_layered_and_named(tmp_path: Path) -> None:
    path = write(tmp_path / "g.toml", PROVIDERS_TOML)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={}, workers=3)
    assert str(info.value).endswith("(the memory store lives inside one process) (from --workers)")
    sqlite = write(
        tmp_path / "s.toml", '[server]\nworkers = 4\n[store]\nbackend = "sqlite"\n' + PROVIDERS_TOML
    )
    assert load_config(sqlite, env={}).server.workers == 4
    assert load_config(sqlite, env={}, workers=2).server.workers == 2
    with pytest.raises(ConfigError, match="server.workers: Input should be greater than or equal to 1"):
        load_config(sqlite, env={}, workers=0)


def test_worker_count_defaults_to_the_cpus_unless_the_store_is_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gateway.config.schema.os.sched_getaffinity", lambda pid: {0, 1, 2})
    assert worker_count(config_from_dict(minimal())) == 1
    assert worker_count(config_from_dict(minimal(store={"backend": "redis"}))) == 3
    assert worker_count(config_from_dict(minimal(server={"workers": 2}, store={"backend": "redis"}))) == 2


def test_uvloop_event_loop_needs_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config_from_dict(minimal()).server.event_loop == "auto"  # uvloop when installed
    monkeypatch.setattr("gateway.config.schema.importlib.util.find_spec", lambda name: None)
    assert error_lines(minimal(server={"event_loop": "uvloop"})) == [
        "cfg.toml: server.event_loop: uvloop is not installed (pip install 'llm-transcript-gateway[uvloop]')"
    ]
    assert config_from_dict(minimal(server={"event_loop": "asyncio"})).server.event_loop == "asyncio"


# --- keys, prices, tracing -------------------------------------------------------------------


def test_keys_prices_and_tracing_validate_describe_and_load_back(tmp_path: Path) -> None:
    data = minimal(
        keys={
            "team-a": {
                "token_env": "TEAM_A",
                "models": ["smart", "claude"],
                "requests_per_minute": 10,
                "budget_usd_per_day": 2.5,
            }
        },
        tracing={"enabled": True, "capture_content": True},
        server={"host": "0.0.0.0"},  # keys are client tokens: binding beyond loopback is allowed
    )
    data["providers"]["claude"]["prices"] = {
        "claude-sonnet-4-5": {"input_per_mtok": 2.0, "output_per_mtok": 9.0}
    }
    config = config_from_dict(data)
    assert config.authenticates and config.limited
    text = describe(config, {"TEAM_A": SECRET})
    assert SECRET not in text and 'token_env = "TEAM_A"  # set' in text
    path = tmp_path / "described.toml"
    path.write_text(text)
    assert load_config(path, env={}) == config


def test_key_mistakes_name_their_key_path() -> None:
    lines = error_lines(minimal(keys={"k": {"token_env": "T", "models": ["nope"], "requests_per_minute": 0}}))
    assert any("keys.k.requests_per_minute" in line for line in lines)
    lines = error_lines(minimal(keys={"k": {"token_env": "T", "models": ["nope"]}}))
    assert lines == ["cfg.toml: keys.k.models[0]: unknown model group or provider 'nope'"]
    data = minimal(keys={"k": {"token_env": "T", "requests_per_minute": 5}}, server={"workers": 2})
    data["store"] = {"backend": "sqlite"}
    assert "server.workers" in error_lines(data)[0]
    data["server"] = {}
    assert worker_count(config_from_dict(data)) == 1, "limits counted in one process: one worker"


def test_otel_variables_decide_tracing_and_name_themselves(tmp_path: Path) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        '[providers.c]\nkind = "anthropic"\nbase_url = "https://api.anthropic.com"\napi_key_env = "K"\n'
    )
    assert load_config(path, env={}).tracing.enabled is False
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "http, gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    tracing = load_config(path, env=env).tracing
    assert tracing.enabled and tracing.semconv == "latest" and tracing.capture_content
    assert load_config(path, env={**env, "OTEL_SDK_DISABLED": "true"}).tracing.enabled is False
    assert load_config(path, env={**env, "OTEL_TRACES_EXPORTER": "none"}).tracing.enabled is False
