"""The results as a table: one line per figure (direct, gateway, added or ratio, the issue's
target), then the CPU shares of the rig while the gateway path was measured."""

from __future__ import annotations

from typing import Any

_ROW = "{:<46}{:>17}{:>17}{:>22}{:>16}"


def _pair(a: float, b: float, signed: bool = False) -> str:
    fmt = "{:+.2f} / {:+.2f}" if signed else "{:.2f} / {:.2f}"
    return fmt.format(a, b)


def _rows(f: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    if c1 := f.get("c1_latency"):
        d, g, a = c1["direct_ms"], c1["gateway_ms"], c1["added_ms"]
        rows.append(
            (
                "c=1 latency p50 / p99, small request (ms)",
                _pair(d["p50"], d["p99"]),
                _pair(g["p50"], g["p99"]),
                _pair(a["p50"], a["p99"], signed=True),
                "+0.4 / +1.0",
            )
        )
    if c32 := f.get("c32_instant"):
        rows.append(
            (
                "c=32 instant upstream (RPS)",
                f"{c32['direct_rps']:,.0f}",
                f"{c32['gateway_rps']:,.0f}",
                f"x{c32['ratio']:.2f}",
                "",
            )
        )
    if c64 := f.get("c64_slow"):
        rows.append(
            (
                f"c=64, 20 ms upstream (RPS; bound {c64['bound_rps']:,.0f})",
                f"{c64['direct_rps']:,.0f} ({c64['direct_of_bound']:.2f})",
                f"{c64['gateway_rps']:,.0f} ({c64['gateway_of_bound']:.2f})",
                f"{c64['gateway_of_bound']:.2f} of bound",
                ">= 0.8",
            )
        )
    if s := f.get("streams"):
        label = f"{s['streams']} streams x {s['chunks']} @{s['interval_ms']} ms"
        d, g = s["direct"], s["gateway"]
        rows.append(
            (
                f"{label}: first chunk p50/p99 (ms)",
                _pair(d["first_chunk_ms"]["p50"], d["first_chunk_ms"]["p99"]),
                _pair(g["first_chunk_ms"]["p50"], g["first_chunk_ms"]["p99"]),
                _pair(s["added_first_chunk_ms"]["p50"], s["added_first_chunk_ms"]["p99"], signed=True),
                "p99 +3",
            )
        )
        rows.append(
            (
                f"{label}: chunk gap p99 (ms)",
                f"{d['gap_ms']['p99']:.2f}",
                f"{g['gap_ms']['p99']:.2f}",
                f"{s['added_gap_p99_ms']:+.2f}",
                "+0.5",
            )
        )
    if m := f.get("many_streams"):
        rows.append(
            (
                f"{m['streams']} streams: worst stall (ms)",
                f"{m['direct']['worst_gap_ms']:.1f}",
                f"{m['gateway']['worst_gap_ms']:.1f}",
                "",
                "<= 200",
            )
        )
    if sw := f.get("sweep"):
        for size, entry in sw["sizes"].items():
            for kind in ("cold", "warm"):
                e = entry[kind]
                target = {("1000", "warm"): "+3", ("1000", "cold"): "+8"}.get((size, kind), "")
                rows.append(
                    (
                        f"transcript {int(size):,} msgs, {kind}, p50 (ms)",
                        f"{e['direct_p50_ms']:.2f}",
                        f"{e['gateway_p50_ms']:.2f}",
                        f"{e['added_p50_ms']:+.2f} ({e['added_us_per_message']:.1f} us/msg)",
                        target,
                    )
                )
        for key, growth in sw.items():
            if key.startswith("growth_") and growth:
                rows.append(
                    (
                        f"transcript {key.removeprefix('growth_').replace('_over_', ' / ')} added",
                        "",
                        "",
                        " / ".join(f"{k} x{v}" for k, v in growth.items()),
                        "<= x6",
                    )
                )
    if mem := f.get("memory"):
        rows.append(
            (
                "gateway RSS idle / under load (MiB)",
                "",
                f"{mem['idle_mib']:.0f} / {mem['under_load_mib']:.0f}",
                "",
                "idle <= 80",
            )
        )
        rows.append(
            (
                f"RSS before / after a {mem['soak_requests']:,}-request soak",
                "",
                f"{mem['before_soak_mib']:.0f} / {mem['after_soak_mib']:.0f}",
                f"{mem['growth_pct']:+.1f}%",
                "<= +5%",
            )
        )
    return rows


_UNIT = {"streams": "chunk", "many_streams": "chunk"}


def _cpu_line(name: str, figure: dict[str, Any]) -> str | None:
    cpu = figure.get("cpu", {})
    shares = cpu.get("gateway") if isinstance(cpu, dict) else None
    if not shares:
        return None
    parts = ", ".join(f"{part} {share * 100:.0f}%" for part, share in shares.items() if part != "wall_s")
    line = f"  {name:<14} {parts}"
    if "gateway_cpu_us_per_unit" in figure:
        unit = _UNIT.get(name, "request")
        line += f"; gateway CPU {figure['gateway_cpu_us_per_unit']:,.0f} us/{unit}"
    return line


def table(results: dict[str, Any]) -> str:
    meta, figures = results["meta"], results["figures"]
    lines = [
        f"gateway bench: commit {meta['commit']}, python {meta['python']}, CPUs {meta['cpus']},"
        f" {meta['pinning']}",
        f"gateway: {meta['gateway_processes']} process(es), workers {meta['workers'] or 'default'},"
        f" store {meta['store']}, event loop {meta['event_loop']};"
        f" stub and load generator on {meta['rig_loop']}; {meta['seconds']} s"
        + (" (quick)" if meta["quick"] else ""),
        "",
        _ROW.format("figure", "direct", "gateway", "added / ratio", "target"),
    ]
    lines += [_ROW.format(*row) for row in _rows(figures)]
    errors = {
        name: fig["errors"]
        for name, fig in figures.items()
        if isinstance(fig.get("errors"), dict) and any(fig["errors"].values())
    }
    for size, entry in figures.get("sweep", {}).get("sizes", {}).items():
        if any(entry["errors"].values()):
            errors[f"sweep {size}"] = entry["errors"]
    lines += [
        "",
        "CPU while the gateway path was measured (share of one core; other = rest of the machine),",
        "and the gateway's CPU time per request or chunk (what other load on the machine changes least):",
    ]
    for name, fig in figures.items():
        line = _cpu_line(name, fig)
        if line:
            lines.append(line)
    for size, entry in figures.get("sweep", {}).get("sizes", {}).items():
        line = _cpu_line(f"sweep {size}", entry)
        if line:
            lines.append(line)
    if errors:
        lines += ["", f"FAILED REQUESTS (not timed): {errors}"]
    return "\n".join(lines)
