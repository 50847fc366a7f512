"""deploy/: what can be checked without Docker or a cluster. Every file parses; compose mounts
the shipped config and dashboard (paths that exist), gives the gateway every variable its config
names, and waits longer than the drain; Prometheus and Grafana are wired to what compose mounts;
the Kubernetes ConfigMap's config passes `gateway check-config`, its Secret and the Deployment's
environment cover every variable that config names, and the probes, the preStop pause and the
grace period fit the config.

What the deployments rely on at run time is covered elsewhere: replicas sharing one real Redis
(tests/e2e/test_store_backends.py::test_redis_shared_by_two_replicas, and every cross-provider
scenario on redis in tests/e2e/test_cross_provider.py), worker processes on one port
(tests/ops/test_workers.py), the SIGTERM drain (tests/ops/test_serve.py), /healthz and /readyz
without a token (tests/ops/test_security.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import yaml

from gateway.cli import main
from gateway.config import GatewayConfig, config_from_dict, load_config
from gateway.security import OPEN_PATHS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"


def load_yaml(path: Path) -> list[Any]:
    return list(yaml.safe_load_all(path.read_text()))


def compose() -> dict[str, Any]:
    (doc,) = load_yaml(DEPLOY / "compose.yaml")
    return doc


def named_variables(config: GatewayConfig) -> set[str]:
    """Every environment variable a config names for a secret."""
    names = {p.api_key_env for p in config.providers.values()}
    if config.auth is not None:
        names.update(config.auth.tokens_env)
    if config.server.continuity_secret_env:
        names.add(config.server.continuity_secret_env)
    return names


def host_path(volume: str) -> tuple[Path, str]:
    """A compose bind mount "host:container[:ro]": the host path (relative to deploy/), the target."""
    source, target = volume.split(":")[:2]
    return (DEPLOY / source).resolve(), target


def test_every_deploy_file_parses():
    files = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
    assert {p.relative_to(DEPLOY).as_posix() for p in files} >= {
        "compose.yaml",
        "prometheus.yml",
        "grafana/provisioning/datasources/prometheus.yaml",
        "grafana/provisioning/dashboards/gateway.yaml",
        "kubernetes/gateway.yaml",
        "kubernetes/redis.yaml",
    }
    for path in files:
        assert all(doc is not None for doc in load_yaml(path)), path


def compose_gateway_config() -> tuple[dict[str, Any], GatewayConfig]:
    gateway = compose()["services"]["gateway"]
    mounts = dict(host_path(v) for v in gateway["volumes"])
    config_path = next(
        src for src, target in mounts.items() if target == gateway["environment"]["GATEWAY_CONFIG"]
    )
    assert config_path.is_relative_to(ROOT / "config") and config_path.is_file()  # the shipped config
    return gateway, load_config(config_path, env={})


def test_compose_runs_replicas_of_the_shipped_config_on_one_redis():
    services = compose()["services"]
    gateway, config = compose_gateway_config()
    assert gateway["build"]["context"] == ".." and (DEPLOY / ".." / "Dockerfile").is_file()
    assert gateway["deploy"]["replicas"] >= 2
    assert config.store.backend == "redis"
    redis_host = config.store.url.removeprefix("redis://").split(":")[0]
    assert redis_host == "redis" or redis_host in services["redis"]["networks"]["default"]["aliases"]
    assert gateway["depends_on"]["redis"]["condition"] == "service_healthy"
    workers = int(gateway["command"][gateway["command"].index("--workers") + 1])
    assert workers > 1 and config.store.backend != "memory"  # the serve refusal does not apply
    assert workers <= gateway["cpus"]


def test_compose_restarts_every_service_that_exits():
    for name, service in compose()["services"].items():
        assert service.get("restart") in ("unless-stopped", "always"), name


def test_compose_gives_the_gateway_every_variable_its_config_names():
    gateway, config = compose_gateway_config()
    env = gateway["environment"]
    assert named_variables(config) <= set(env)
    required = set(config.auth.tokens_env) | {config.server.continuity_secret_env}
    for name in required:  # compose refuses to start without them rather than pass ""
        assert env[name].startswith(f"${{{name}:?"), name


def test_compose_stop_grace_outlasts_the_drain():
    gateway, config = compose_gateway_config()
    assert gateway["stop_grace_period"].endswith("s")
    assert float(gateway["stop_grace_period"].removesuffix("s")) > config.server.shutdown_grace_seconds


def test_compose_load_balancer_streams_unbuffered_to_the_replicas():
    proxy = compose()["services"]["proxy"]
    ((conf_path, target),) = (host_path(v) for v in proxy["volumes"])
    assert target == "/etc/nginx/nginx.conf" and conf_path.is_file()
    conf = conf_path.read_text()
    _, config = compose_gateway_config()
    assert f"server gateway:{config.server.port} resolve;" in conf
    for directive in ("proxy_buffering off;", "proxy_http_version 1.1;", 'proxy_set_header Connection "";'):
        assert directive in conf
    assert f"{config.server.max_body_bytes // 2**20}m;" in conf  # client_max_body_size


def test_compose_prometheus_scrapes_every_replica_with_a_token():
    doc = compose()
    prometheus = doc["services"]["prometheus"]
    ((conf_path, target),) = (host_path(v) for v in prometheus["volumes"])
    assert target == "/etc/prometheus/prometheus.yml"
    (job,) = yaml.safe_load(conf_path.read_text())["scrape_configs"]
    _, config = compose_gateway_config()
    assert job["metrics_path"] == "/metrics"
    assert job["dns_sd_configs"] == [
        {"names": ["gateway"], "type": "A", "port": config.server.port, "refresh_interval": "15s"}
    ]
    # /metrics from another container needs one of the [auth] tokens: a compose secret from it
    (secret,) = prometheus["secrets"]
    assert job["authorization"]["credentials_file"] == f"/run/secrets/{secret}"
    assert doc["secrets"][secret]["environment"] in config.auth.tokens_env


def test_compose_grafana_is_provisioned_with_the_shipped_dashboard():
    grafana = compose()["services"]["grafana"]
    mounts = dict(host_path(v) for v in grafana["volumes"])
    dashboard = ROOT / "dashboards" / "gateway.json"
    assert mounts[dashboard.resolve()].startswith("/var/lib/grafana/dashboards/")
    provisioning = DEPLOY / "grafana" / "provisioning"
    assert mounts[provisioning.resolve()] == "/etc/grafana/provisioning"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "gateway.yaml").read_text())["providers"]
    assert mounts[dashboard.resolve()].rsplit("/", 1)[0] == provider["options"]["path"]
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    assert source["url"] == "http://prometheus:9090" and "prometheus" in compose()["services"]


def k8s(kind: str, path: Path = K8S / "gateway.yaml") -> list[dict[str, Any]]:
    return [doc for doc in load_yaml(path) if doc["kind"] == kind]


def k8s_config() -> GatewayConfig:
    (configmap,) = k8s("ConfigMap")
    return config_from_dict(tomllib.loads(configmap["data"]["gateway.toml"]), source="ConfigMap")


def test_k8s_configmap_passes_check_config(tmp_path, capsys):
    (configmap,) = k8s("ConfigMap")
    path = tmp_path / "gateway.toml"
    path.write_text(configmap["data"]["gateway.toml"])
    assert main(["check-config", str(path)]) == 0
    assert "[store]" in capsys.readouterr().out
    config = k8s_config()
    assert config.store.backend == "redis" and config.auth is not None
    (redis_service,) = k8s("Service", K8S / "redis.yaml")
    assert config.store.url.startswith(f"redis://{redis_service['metadata']['name']}:")


def container() -> tuple[dict[str, Any], dict[str, Any]]:
    (deployment,) = k8s("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (gateway,) = pod["containers"]
    return pod, gateway


def test_k8s_secret_and_environment_cover_every_variable_the_config_names():
    config = k8s_config()
    (secret,) = k8s("Secret")
    _, gateway = container()
    names = named_variables(config)
    assert names <= set(secret["stringData"])
    from_secret = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in gateway["env"] if "valueFrom" in e}
    for name in names:
        assert from_secret[name] == {"name": secret["metadata"]["name"], "key": name}


def test_k8s_deployment_mounts_the_config_probes_and_drains():
    config = k8s_config()
    pod, gateway = container()
    (deployment,) = k8s("Deployment")
    assert deployment["spec"]["replicas"] >= 2
    env = {e["name"]: e.get("value") for e in gateway["env"]}
    mounts = {m["name"]: m["mountPath"] for m in gateway["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_volume = next(n for n, v in volumes.items() if "configMap" in v)
    assert volumes[config_volume]["configMap"]["name"] == k8s("ConfigMap")[0]["metadata"]["name"]
    assert env["GATEWAY_CONFIG"] == mounts[config_volume] + "/gateway.toml"
    (port,) = gateway["ports"]
    assert port["containerPort"] == config.server.port
    assert gateway["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert gateway["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert gateway["livenessProbe"]["failureThreshold"] * gateway["livenessProbe"]["periodSeconds"] >= 30
    assert {"/readyz", "/healthz"} <= OPEN_PATHS  # the kubelet's probes carry no token
    pause = float(gateway["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] > pause + config.server.shutdown_grace_seconds
    # workers > 1 writes the shared metrics files under /tmp: writable on a read-only root
    assert config.server.workers and config.server.workers > 1
    assert gateway["securityContext"]["readOnlyRootFilesystem"] is True and mounts["tmp"] == "/tmp"
    assert config.server.workers <= int(gateway["resources"]["limits"]["cpu"])


def test_k8s_service_selects_the_pods():
    (deployment,) = k8s("Deployment")
    (service,) = k8s("Service")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == container()[1]["ports"][0]["name"]
