"""The figures tests check, read from a gateway's metrics as a scrape reads them (the registry's
public API: never prometheus-client's private attributes, which a release may rename)."""

from __future__ import annotations

from gateway.metrics import Metrics


def requests_counted(metrics: Metrics, ingress: str, model: str, provider: str, outcome: str) -> float:
    """`gateway_requests_total` of those labels (0 for a series never made)."""
    labels = {"ingress": ingress, "model": model, "provider": provider, "outcome": outcome}
    return metrics.registry.get_sample_value("gateway_requests_total", labels) or 0.0


def repairs_counted(metrics: Metrics, provider: str, kind: str) -> float:
    """`gateway_repairs_total` of those labels (0 for a series never made)."""
    labels = {"provider": provider, "kind": kind}
    return metrics.registry.get_sample_value("gateway_repairs_total", labels) or 0.0
