"""Options only one provider kind understands (`Request.provider_options`, keyed by kind: e.g. a
Messages client's metadata, context_management and anthropic-beta flags).

A target keeps its own kind's options and, of the `betas` a client passed, only those its
capabilities list (features whose request and answer shapes its adapter handles). Everything else
is left out for it and counted (`provider_option_dropped`, the detail names the option).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.repair.report import Repair
from gateway.transcript.target import Capabilities, Target

BETAS = "betas"
Options = Mapping[str, Mapping[str, Any]]


def options_for_target(options: Options, target: Target, caps: Capabilities) -> tuple[Options, list[Repair]]:
    repairs: list[Repair] = []
    kept: dict[str, Mapping[str, Any]] = {}
    for kind, values in options.items():
        if kind != target.kind:
            repairs.extend(Repair("provider_option_dropped", f"{kind}.{name}") for name in values)
            continue
        betas = values.get(BETAS)
        if betas is None:
            kept[kind] = values
            continue
        usable = tuple(b for b in betas if b in caps.client_betas)
        dropped = (b for b in betas if b not in usable)
        repairs.extend(Repair("provider_option_dropped", f"{kind}.beta {b}") for b in dropped)
        own = {k: v for k, v in values.items() if k != BETAS}
        if usable:
            own[BETAS] = usable
        kept[kind] = own
    if not repairs:
        return options, repairs
    return kept, repairs
