"""The README's "Remote browsers" example runs and says what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.chromium

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(240)  # above the subprocess's own 180 s bound, which reports stderr
def test_the_remote_browser_demo_survives_a_cut_and_rebinds_after_a_process_kill() -> None:
    """demos/remote_browser.py: a cut is no restart; a new process re-binds, login survived."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "demos" / "remote_browser.py")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == (
        "RESULT cut_restarted=False cut_same_tab=True "
        "rebind_restarted=False tabs_readopted=2 login=survived"
    )
