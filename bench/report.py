"""The results as a table: one line per figure (direct, then the floor and each gateway variant
with what it adds over direct and, for a gateway, its own cost above the floor, then the issue's
target), then the CPU shares of the rig while each variant was measured and the gateway's CPU
time per request."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.figures import DIRECT, FLOOR

Cell = Callable[[str], str]  # path name -> the text of its cell
_LABEL, _CELL, _TARGET = 46, 17, 14


def _pair(values: dict[str, float], signed: bool = False) -> str:
    fmt = "{:+.2f} / {:+.2f}" if signed else "{:.2f} / {:.2f}"
    return fmt.format(values["p50"], values["p99"])


def _none(_: str) -> str:
    return ""


class Table:
    """A value and what it adds over direct per variant; a gateway variant also gets its own cost
    above the floor (the bare relay) when the floor was measured."""

    def __init__(self, variants: list[str], floor: bool) -> None:
        self.variants = variants
        self.floor = floor
        self.lines: list[str] = []

    def _above(self, name: str) -> bool:
        return self.floor and name != FLOOR

    def header(self) -> None:
        cells = [f"{'direct':>{_CELL}}"]
        for name in self.variants:
            cells += [f"{name:>{_CELL}}", f"{'added':>{_CELL + 6}}"]
            if self._above(name):
                cells.append(f"{'above floor':>{_CELL}}")
        self.lines.append(f"{'figure':<{_LABEL}}" + "".join(cells) + f"{'target':>{_TARGET}}")

    def row(
        self,
        label: str,
        value: Cell,
        added: Cell,
        target: str = "",
        direct: str | None = None,
        above: Cell = _none,
    ) -> None:
        cells = [f"{value(DIRECT) if direct is None else direct:>{_CELL}}"]
        for name in self.variants:
            cells += [f"{value(name):>{_CELL}}", f"{added(name):>{_CELL + 6}}"]
            if self._above(name):
                cells.append(f"{above(name):>{_CELL}}")
        self.lines.append(f"{label:<{_LABEL}}" + "".join(cells) + f"{target:>{_TARGET}}")


def _rows(t: Table, f: dict[str, Any]) -> None:
    if c1 := f.get("c1_latency"):
        t.row(
            "c=1 latency p50 / p99, small request (ms)",
            lambda n: _pair(c1["latency_ms"][n]),
            lambda n: _pair(c1["added_ms"][n], signed=True),
            "floor +0.15",
            above=lambda n: _pair(c1["above_floor_ms"][n], signed=True),
        )
    if c32 := f.get("c32_instant"):
        t.row(
            "c=32 instant upstream (RPS)",
            lambda n: f"{c32['rps'][n]:,.0f}",
            lambda n: f"x{c32['ratio'][n]:.2f}",
            ">= 0.6 floor",
            above=lambda n: f"x{c32['of_floor'][n]:.2f} of floor",
        )
    if c64 := f.get("c64_slow"):
        t.row(
            f"c=64, 20 ms upstream (RPS; bound {c64['bound_rps']:,.0f})",
            lambda n: f"{c64['rps'][n]:,.0f} ({c64['of_bound'][n]:.2f})",
            lambda n: f"{c64['of_bound'][n]:.2f} of bound",
            ">= 0.9",
            above=lambda n: f"x{c64['of_floor'][n]:.2f} of floor",
        )
    if s := f.get("streams"):
        label = f"{s['streams']} streams x {s['chunks']} @{s['interval_ms']} ms"
        t.row(
            f"{label}: first chunk p50/p99 (ms)",
            lambda n: _pair(s["first_chunk_ms"][n]),
            lambda n: _pair(s["added_first_chunk_ms"][n], signed=True),
            "p99 floor +2",
            above=lambda n: _pair(s["above_floor_first_chunk_ms"][n], signed=True),
        )
        t.row(
            f"{label}: chunk gap p99 (ms)",
            lambda n: f"{s['gap_ms'][n]['p99']:.2f}",
            lambda n: f"{s['added_gap_ms'][n]['p99']:+.2f}",
            "floor +0.3",
            above=lambda n: f"{s['above_floor_gap_ms'][n]['p99']:+.2f}",
        )
        if connects := s.get("upstream_connects"):  # direct: the load generator's connections
            filled = s.get("upstream_connects_before", {})

            def both(n: str) -> str:
                before = filled.get(n, [0] * len(connects[n]))
                return " ".join(f"{a}+{b}" for a, b in zip(before, connects[n], strict=True))

            t.row(
                f"{label}: connects fill+timed",
                both,
                lambda n: "",
            )
    if m := f.get("many_streams"):
        t.row(
            f"{m['streams']} streams: worst stall (ms)",
            lambda n: f"{m['worst_gap_ms'][n]:.1f}",
            lambda n: "",
            "<= 200",
            above=lambda n: f"{m['above_floor_worst_gap_ms'][n]:+.1f}",
        )
    if sw := f.get("sweep"):
        for size, entry in sw["sizes"].items():
            for kind in ("cold", "warm"):
                e = entry[kind]
                t.row(
                    f"transcript {int(size):,} msgs, {kind}, p50 (ms)",
                    lambda n, e=e: f"{e['p50_ms'][n]:.2f}",
                    lambda n, e=e: f"{e['added_p50_ms'][n]:+.2f} ({e['added_us_per_message'][n]:.1f} us/msg)",
                    {("1000", "warm"): "floor +1.5", ("1000", "cold"): "floor +6"}.get((size, kind), ""),
                    above=lambda n, e=e: f"{e['above_floor_p50_ms'][n]:+.2f}",
                )
        if "growth" in sw:
            largest, base = sw["growth_of"]
            t.row(
                f"transcript added, {largest:,} over {base:,} msgs",
                lambda n: "",
                lambda n: " / ".join(f"{k} x{v}" for k, v in sw["growth"][n].items()),
                "<= x5",
            )
    if mem := f.get("memory"):
        t.row(
            "gateway RSS idle / under load (MiB)",
            lambda n: f"{mem[n]['idle_mib']:.0f} / {mem[n]['under_load_mib']:.0f}",
            lambda n: "",
            "idle <= 80",
            direct="",
        )
        soak = next(iter(mem.values()))["soak_requests"]
        t.row(
            f"RSS before / after a {soak:,}-request soak",
            lambda n: f"{mem[n]['before_soak_mib']:.0f} / {mem[n]['after_soak_mib']:.0f}",
            lambda n: f"{mem[n]['growth_pct']:+.1f}%",
            "<= +5%",
            direct="",
        )


_UNIT = {"streams": "chunk", "many_streams": "chunk"}


def _cpu_lines(name: str, figure: dict[str, Any], variants: list[str]) -> list[str]:
    lines = []
    for variant in variants:
        above = ""
        if name == "memory":
            shares, per_unit = figure[variant]["cpu"], figure[variant]["gateway_cpu_us_per_unit"]
            if variant != FLOOR and FLOOR in figure:
                above = f" (floor +{per_unit - figure[FLOOR]['gateway_cpu_us_per_unit']:,.0f})"
        else:
            shares, per_unit = figure["cpu"][variant], figure["gateway_cpu_us_per_unit"][variant]
            if variant in figure.get("above_floor_cpu_us_per_unit", {}):
                above = f" (floor +{figure['above_floor_cpu_us_per_unit'][variant]:,.0f})"
        parts = ", ".join(f"{part} {share * 100:.0f}%" for part, share in shares.items())
        who = f" [{variant}]" if len(variants) > 1 else ""
        unit = _UNIT.get(name, "request")
        rig = _rig_cpu(figure, variant, unit)
        lines.append(f"  {name + who:<24} {parts}; gateway CPU {per_unit:,.0f} us/{unit}{above}{rig}")
    if (direct := _rig_cpu(figure, "direct", _UNIT.get(name, "request"))) and len(variants) > 1:
        lines.append(f"  {name + ' [direct]':<24}{direct.removeprefix(';')}")
    return lines


def _turn_cpu_lines(name: str, entry: dict[str, Any], variants: list[str]) -> list[str]:
    """The gateway's CPU per cold and per warm turn (the line above is their mean), each with
    its own cost above the floor's: what to set beside that turn's latency above the floor."""
    if "gateway_cpu_us_per_request" not in entry["cold"]:  # a run from before they were kept
        return []
    lines = []
    for variant in variants:
        parts = []
        for kind in ("cold", "warm"):
            cpu = entry[kind]["gateway_cpu_us_per_request"][variant]
            above = entry[kind].get("above_floor_cpu_us_per_request", {}).get(variant)
            parts.append(f"{kind} {cpu:,.0f}" + (f" (floor +{above:,.0f})" if above is not None else ""))
        who = f" [{variant}]" if len(variants) > 1 else ""
        lines.append(f"  {name + who:<24} gateway CPU per turn: {', '.join(parts)} us")
    return lines


def _rig_cpu(figure: dict[str, Any], path: str, unit: str) -> str:
    """The stub's and the load generator's CPU per unit while `path` was measured (runs from
    before the rig's figure was kept have none)."""
    value = figure.get("rig_cpu_us_per_unit", {}).get(path)
    return f"; rig CPU {value:,.0f} us/{unit}" if value is not None else ""


def _errors(figures: dict[str, Any], variants: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, fig in figures.items():
        if name == "memory":
            counts = {v: fig[v]["errors"] for v in variants}
        elif name == "sweep":
            for size, entry in fig["sizes"].items():
                if any(entry["errors"].values()):
                    found[f"sweep {size}"] = entry["errors"]
            continue
        else:
            counts = fig["errors"]
        if any(counts.values()):
            found[name] = counts
    return found


def table(results: dict[str, Any]) -> str:
    meta, figures = results["meta"], results["figures"]
    variants = [v["name"] for v in meta["variants"]]
    lines = [
        f"gateway bench: commit {meta['commit']}, python {meta['python']}, CPUs {meta['cpus']};"
        f" stub and load generator on {meta['rig_loop']}, {meta['rig_pinning']};"
        f" {meta['seconds']} s" + (" (quick)" if meta["quick"] else ""),
    ]
    for v in meta["variants"]:
        lines.append(
            f"  {v['name']}: {v['processes']} process(es), workers {v['workers'] or 'default'},"
            f" store {v['store']}, event loop {v['event_loop']}, {v['pinning']}"
            + (f", tree {v['tree']}" if v["tree"] else "")
            + (" (the floor: bench/relay.py, a bare aiohttp relay)" if v.get("relay") else "")
        )
    t = Table(variants, any(v.get("relay") for v in meta["variants"]))
    t.header()
    _rows(t, figures)
    lines += ["", *t.lines]
    lines += [
        "",
        "CPU while each gateway was measured (share of one core; other = rest of the machine),",
        "and the gateway's CPU time per request or chunk (what other load on the machine changes least):",
    ]
    for name, fig in figures.items():
        if name == "sweep":
            for size, entry in fig["sizes"].items():
                lines += _cpu_lines(f"sweep {size}", entry, variants)
                lines += _turn_cpu_lines(f"sweep {size}", entry, variants)
        else:
            lines += _cpu_lines(name, fig, variants)
    errors = _errors(figures, variants)
    if errors:
        lines += ["", f"FAILED REQUESTS (not timed): {errors}"]
    return "\n".join(lines)
