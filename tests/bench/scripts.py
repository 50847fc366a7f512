"""A bench script run as a child process, as its smoke tests need: the path benches instrument
aiohttp's classes for the whole process they run in."""

from __future__ import annotations

import os
import subprocess
import sys

from bench import rig


def run_script(script: str, *args: str) -> str:
    """What `bench/<script> args` prints, run from the checkout's root; fails with the end of its
    stderr when it exits non-zero."""
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args],
        cwd=rig.ROOT,
        env={**os.environ, "PYTHONPATH": str(rig.ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
