"""dashboards/: every PromQL expression in the Grafana dashboard (panels, template variables,
legends) uses only metrics and labels the gateway actually exports, and every contract metric
has a panel. The exported names come from a real scrape, not from a list kept beside the test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics import AttemptOutcome, Metrics, RequestRecord
from gateway.repair.report import Repair
from gateway.transcript.model import Usage
from tests.ops.test_metrics_contract import CONTRACT

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "gateway.json"

# PromQL words that are not metric names
PROMQL_WORDS = frozenset(
    "sum avg min max count stddev stdvar topk bottomk quantile count_values group "
    "rate irate increase delta idelta deriv histogram_quantile clamp_min clamp_max abs ceil floor "
    "round label_replace label_join vector scalar time absent absent_over_time avg_over_time "
    "max_over_time min_over_time sum_over_time count_over_time last_over_time "
    "by without on ignoring group_left group_right and or unless bool offset inf nan".split()
)


def exported() -> dict[str, set[str]]:
    """Sample name -> label keys, from a scrape of a Metrics that saw one of everything."""
    metrics = Metrics()
    metrics.watch_targets([("smart", "claude", lambda: 1.0)])
    metrics.count_store_operation("memory", "get", "hit")
    metrics.record(
        RequestRecord(
            "chat_completions",
            model="smart",
            provider="gemini",
            ttft=0.3,
            duration=1.2,
            attempts=[AttemptOutcome("claude", "overloaded"), AttemptOutcome("gemini", "ok")],
            repairs=[("gemini", Repair("synthetic_tool_result"))],
            usage=Usage(10, 5, 2, 1, 3),
            ignored_tokens=1,
            affinity_break="unhealthy",
        )
    )
    metrics.record(
        RequestRecord(
            "chat_completions",
            model="smart",
            provider="claude",
            usage=Usage(10, 5),
            cost_usd=0.01,
            key="team-a",
            key_refusal="limited_budget",
        )
    )
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


def expressions(dashboard: dict) -> list[tuple[str, str, str]]:
    """(where, expr, legendFormat) for every panel target and template variable query."""
    found = []

    def walk(panels: list[dict]) -> None:
        for panel in panels:
            for target in panel.get("targets", ()):
                found.append((panel["title"], target["expr"], target.get("legendFormat", "")))
            walk(panel.get("panels", ()))

    walk(dashboard["panels"])
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", query)
            assert match, f"variable {var['name']}: unexpected query {query!r}"
            found.append((f"variable {var['name']}", f'{match[1]}{{{match[2]}=~".*"}}', ""))
    return found


def check_expression(expr: str, names: dict[str, set[str]]) -> tuple[set[str], set[str]]:
    """Returns (metrics used, labels available on them); fails on any unknown name or label."""
    used: set[str] = set()
    for metric, matchers in re.findall(r"\b([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}", expr):
        assert metric in names, f"unknown metric {metric} in {expr}"
        for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", matchers):
            assert label in names[metric], f"{metric} has no label {label!r} ({expr})"
        used.add(metric)
    bare = re.sub(r'"[^"]*"', '""', expr)  # string literals hold values, not names
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)
    groupings = re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", bare)
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", bare)
    for word in re.findall(r"\b[a-zA-Z_:][\w:]*\b", bare):
        if word in PROMQL_WORDS:
            continue
        assert word in names, f"unknown metric or function {word!r} in {expr}"
        used.add(word)
    assert used, f"no gateway metric in {expr}"
    labels = set().union(*(names[m] for m in used))
    for group in groupings:
        for label in filter(None, (part.strip() for part in group.split(","))):
            assert label in labels, f"grouping by {label!r}, which none of {sorted(used)} has ({expr})"
    return used, labels


def test_every_dashboard_expression_uses_exported_metrics_and_labels():
    dashboard = json.loads(DASHBOARD.read_text())
    names = exported()
    all_used: set[str] = set()
    found = expressions(dashboard)
    assert len(found) >= 20
    for where, expr, legend in found:
        used, labels = check_expression(expr, names)
        grouped = set(re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr))
        kept = {part.strip() for group in grouped for part in group.split(",")} or labels
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend):
            assert label in kept, f"{where}: legend uses {label!r}, not in the result of {expr}"
        all_used |= used
    families = {re.sub(r"_(bucket|count|sum)$", "", m) for m in all_used}
    for name in CONTRACT:
        assert name in families, f"no panel shows {name}"


def test_dashboard_panels_cover_what_operators_watch():
    dashboard = json.loads(DASHBOARD.read_text())
    titles = " | ".join(p["title"].lower() for p in dashboard["panels"])
    for topic in (
        "requests by model and provider",
        "error",
        "request duration p50",
        "time to first token",
        "upstream attempts",
        "failovers",
        "repairs by kind",
        "tokens / s by type",
        "target availability",
        "store operations",
        "in flight",
        "cost (usd / hour) by provider and model",
        "unpriced answers",
        "client key requests",
    ):
        assert topic in titles, topic
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], panel["title"]


@pytest.mark.parametrize(
    "expr",
    [
        "sum(rate(gateway_request_total[5m]))",  # misspelt metric
        'sum by (model) (rate(gateway_upstream_attempts_total{provider="x"}[5m]))',  # label it lacks
        'sum(rate(gateway_tokens_total{kind="input"}[5m]))',  # matcher on a label it lacks
        "sum(rate(process_cpu_seconds_total[5m]))",  # a metric the gateway does not export
    ],
)
def test_the_check_catches_a_wrong_expression(expr):
    with pytest.raises(AssertionError):
        check_expression(expr, exported())


def test_example_scrape_config_scrapes_metrics_and_authenticates_off_host():
    config = yaml.safe_load((ROOT / "dashboards" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert all(job["metrics_path"] == "/metrics" for job in jobs.values())
    for job in jobs.values():
        targets = [t for group in job["static_configs"] for t in group["targets"]]
        local = all(t.startswith(("127.", "localhost:", "[::1]:")) for t in targets)
        # off the host, /metrics needs the [auth] bearer token
        assert local or job["authorization"]["type"] == "Bearer", job["job_name"]
    assert (ROOT / "dashboards" / "README.md").read_text().count("gateway.json") >= 2


def _readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_readme_metrics_table_is_the_contract():
    rows = re.findall(
        r"^\| `(gateway_\w+)` \| (\w+) \|([^|]*)\|", _readme_section("Metrics and dashboards"), re.M
    )
    table = {
        name: (kind, {label.strip() for label in labels.split(",") if label.strip()})
        for name, kind, labels in rows
    }
    names = exported()
    for name, spec in CONTRACT.items():
        assert table.get(name) == spec, name
    for name in table:  # every documented metric is exported
        assert any(sample == name or sample.startswith(name + "_") for sample in names), name


def test_the_readme_explains_every_repair_kind():
    from gateway.repair.report import REPAIR_KINDS

    rows = re.findall(r"^\| `(\w+)` \| .{20,} \|$", _readme_section("Repair kinds"), re.M)
    assert rows == list(REPAIR_KINDS)


def test_a_panel_shows_requests_by_ingress():
    dashboard = json.loads(DASHBOARD.read_text())
    by_ingress = [
        (where, expr)
        for where, expr, _ in expressions(dashboard)
        if "gateway_requests_total" in expr and re.search(r"by \([^)]*\bingress\b", expr)
    ]
    assert by_ingress, "requests by client dialect (chat_completions, anthropic_messages)"


def test_a_store_batch_counts_every_operation_it_holds():
    metrics = Metrics()
    metrics.count_store_operation("memory", "get", "miss", 500)
    metrics.count_store_operation("memory", "get", "miss")
    value = metrics.registry.get_sample_value(
        "gateway_store_operations_total", {"backend": "memory", "op": "get", "outcome": "miss"}
    )
    assert value == 501


def test_repairs_are_counted_by_provider_and_kind_however_many_one_request_makes():
    metrics = Metrics()
    metrics.bind(["claude", "openai"], ["claude", "openai"])
    repairs = [("openai", Repair("reasoning_dropped"))] * 500 + [
        ("openai", Repair("tool_id_projected")),
        ("claude", Repair("reasoning_dropped")),
    ]
    metrics.record(RequestRecord("chat", model="openai", provider="openai", repairs=repairs))

    def sample(provider: str, kind: str) -> float | None:
        return metrics.registry.get_sample_value(
            "gateway_repairs_total", {"provider": provider, "kind": kind}
        )

    assert sample("openai", "reasoning_dropped") == 500
    assert sample("openai", "tool_id_projected") == 1
    assert sample("claude", "reasoning_dropped") == 1
