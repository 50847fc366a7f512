"""The bench rig: the upstream stub and the gateway as child processes (optionally pinned to CPUs),
and what /proc tells about them (CPU time, RSS) and about the machine as a whole."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TICKS = os.sysconf("SC_CLK_TCK")


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@dataclass(frozen=True)
class Pinning:
    """Which CPUs a one-process gateway gets to itself, and which the stub and the load generator
    share (None: not pinned)."""

    gateway: frozenset[int] | None
    rig: frozenset[int] | None

    @classmethod
    def plan(cls, pin: bool) -> Pinning:
        cpus = available_cpus()
        if not pin or len(cpus) < 2:
            return cls(None, None)
        return cls(frozenset(cpus[:1]), frozenset(cpus[1:]))


def describe_cpus(cpus: Iterable[int] | None) -> str:
    return f"pinned to CPU {','.join(map(str, sorted(cpus)))}" if cpus is not None else "not pinned"


class Child:
    """A child process that prints one line once it is ready."""

    def __init__(
        self,
        name: str,
        args: Sequence[str],
        env: dict[str, str],
        cpus: frozenset[int] | None,
        log: Path,
        cwd: Path = ROOT,
    ) -> None:
        self.name = name
        self.log = log  # stderr goes to a file: a pipe nobody reads would block the child

        def pin() -> None:  # in the child, before exec: its own children inherit the mask
            if cpus is not None:
                os.sched_setaffinity(0, cpus)

        with log.open("w") as err:
            self.proc = subprocess.Popen(
                args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=err, text=True, preexec_fn=pin
            )

    def wait_ready(self, marker: str, timeout: float = 60) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            if marker in line:
                return line.strip()
            if time.monotonic() > deadline:
                break
        self.stop()
        raise RuntimeError(f"{self.name} did not start:\n{self.stderr_text()}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def pids(self) -> list[int]:
        """The process and its children (the gateway's workers)."""
        return [self.pid, *children(self.pid)]

    def stderr_text(self) -> str:
        try:
            return self.log.read_text()[-4000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU time of the processes (the ones that have exited count as 0)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / _TICKS


def cpu_ns(pids: Iterable[int]) -> int:
    """Nanoseconds on a CPU of every thread of the processes (the scheduler's own sum, exact where
    /proc/<pid>/stat counts in clock ticks of 10 ms): read while they sleep between two requests,
    the difference is what the requests between cost."""
    total = 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                total += int((task / "schedstat").read_text().split(maxsplit=1)[0])
            except (OSError, ValueError):
                continue
    return total


def machine_busy_seconds() -> float:
    """CPU time every core of the machine spent busy (all processes, ours and others')."""
    parts = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + parts[4]  # idle + iowait
    return (sum(parts[:8]) - idle) / _TICKS


def rss_mib(pids: Iterable[int]) -> float:
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
                break
    return total / 1024


class CpuMeter:
    """CPU used by each part of the rig over one phase, as a share of one core."""

    def __init__(self, parts: dict[str, list[int]]) -> None:
        self.parts = parts
        self._start = time.monotonic()
        self._before = {name: cpu_seconds(pids) for name, pids in parts.items()}
        self._machine = machine_busy_seconds()

    def shares(self) -> dict[str, float]:
        wall = max(time.monotonic() - self._start, 1e-9)
        out = {name: (cpu_seconds(pids) - self._before[name]) / wall for name, pids in self.parts.items()}
        machine = (machine_busy_seconds() - self._machine) / wall
        out["other"] = max(0.0, machine - sum(out.values()))  # other processes on the machine
        return {name: round(value, 3) for name, value in out.items()}
