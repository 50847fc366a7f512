"""The dependency direction of the architecture (README "Architecture"): a module imports only
what stands below it. Checked on the source's import statements, so a shortcut that would tie the
pure core to the edges fails here instead of in review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gateway"

# layer of each top-level part of the package; a module may import from its own layer or lower
LAYERS = {
    "cli": 7,
    "serve": 7,
    "workers": 7,
    "inspect_cli": 7,
    "eventloop": 7,
    "demo": 7,
    "app": 6,
    "server": 6,
    "handlers": 5,
    "lifecycle": 4,
    "exchange": 4,
    "books": 4,  # a finished request's bookkeeping, held and done in batches (gateway/books.py)
    "answering": 4,  # the exchange after its commit point (gateway/answering.py)
    "stream_relay": 4,  # a streamed answer relayed event by event (gateway/stream_relay.py)
    "inspector": 4,
    "state": 4,
    "access_log": 4,
    "ingress": 3,
    "http_errors": 3,
    "routing": 3,
    "continuity": 3,
    "providers": 2,
    "repair": 2,
    "store": 2,
    "upstream": 2,
    # the HTTP/1.1 client under upstream.py (its only user: see the test below)
    "upstream_http": 1,
    "upstream_connection": 1,
    "headers": 2,  # the upstream header allow-list, from the family records; upstream checks it
    "metrics": 2,
    "metric_series": 0,  # unlocked metric families under metrics.py (no gateway imports)
    "cost": 2,
    "tracing": 2,
    "limits": 3,
    "security": 5,
    "browser": 5,  # security's browser checks (Host, Origin, media type)
    "whole_answer": 5,  # a whole answer's head as aiohttp and security's restriction write it
    "stream_head": 5,  # a streamed answer's head, the same way (gateway/stream_head.py)
    # config validates model names against the providers' capability data
    "redaction": 2,
    "config": 2,
    "session": 1,
    "sse": 1,
    "offload": 1,  # the thread large requests are worked on in (no gateway imports)
    # a vendor's wire forms its dialect and its provider family share (server tools, citations)
    "wire": 1,
    "transcript": 0,
    "bounded_cache": 0,  # the module caches' bound (no gateway imports)
    "deadlines": 0,  # many deadlines behind one loop timer (no gateway imports)
}
# siblings on one layer that must not know each other (DESIGN.md section 3)
APART = {("providers", "ingress"), ("ingress", "providers"), ("repair", "providers"), ("ingress", "routing")}


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "gateway" else None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        part = rel.parts[0]
        if part in ("simulators", "__init__", "__main__", "__version__"):
            continue
        yield part, path


@pytest.mark.parametrize(("part", "path"), list(_modules()), ids=lambda v: str(v).rsplit("gateway/", 1)[-1])
def test_a_module_imports_only_what_stands_below_it(part, path):
    assert part in LAYERS, f"{part} has no place in the architecture's layers (tests/test_layers.py)"
    for module in _imports(path):
        other = _part(module)
        if other is None or other == part or other in ("__version__",):
            continue
        if other == "simulators":
            # product code never imports its judges; the demo starts them (the hub's path of each
            # family is in the family's record)
            assert part in ("demo", "cli"), f"{path}: only the demo starts simulators"
            continue
        assert other in LAYERS, f"{path} imports {module}, which has no layer"
        assert LAYERS[other] <= LAYERS[part], f"{path} ({part}) imports {module} ({other}) from above it"
        assert (part, other) not in APART, f"{path}: {part} must not import {other}"


def test_the_simulators_never_import_the_code_they_judge():
    for path in sorted((PACKAGE / "simulators").rglob("*.py")):
        for module in _imports(path):
            other = _part(module)
            assert other in (None, "simulators"), f"{path} imports {module}"


def test_only_upstream_uses_the_provider_http_client():
    for part, path in _modules():
        for module in _imports(path):
            if _part(module) in ("upstream_http", "upstream_connection"):
                assert part in ("upstream", "upstream_http"), (
                    f"{path} imports {module}: only upstream.py calls providers"
                )
