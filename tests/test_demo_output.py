"""The fake-clock demo prints the seed's 18 example lines exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTED = (Path(__file__).parent / "expected" / "seed_demo_output.txt").read_text()


def test_fake_clock_demo_prints_the_seed_output_exactly() -> None:
    """`python demos/fake_clock.py` on FakeBackend reproduces the seed's output line for line."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "demos" / "fake_clock.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        # The package of this checkout, not whichever one the interpreter has installed.
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout == EXPECTED
    assert len(out.stdout.splitlines()) == 18
    assert out.stderr == ""
