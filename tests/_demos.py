"""A demo run as its reader runs it: ``python demos/<name>`` from the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_demo(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``demos/<name> *args`` from the repository root with this checkout's package
    first on the path (not whichever one the interpreter has installed), and fail the
    test with the tails of its output unless it exits 0. ``timeout`` (seconds) is the
    subprocess's own bound; a test's pytest timeout stands above it."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "demos" / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out
