"""The README's "Remote browsers" example runs and says what it promises."""

from __future__ import annotations

import pytest

from tests._demos import run_demo

pytestmark = pytest.mark.chromium


@pytest.mark.timeout(240)  # above the subprocess's own 180 s bound, which reports stderr
def test_the_remote_browser_demo_survives_a_cut_and_rebinds_after_a_process_kill() -> None:
    """demos/remote_browser.py: a cut is no restart; a new process re-binds, login survived."""
    out = run_demo("remote_browser.py", timeout=180)
    assert out.stdout.splitlines()[-1] == (
        "RESULT cut_restarted=False cut_same_tab=True "
        "rebind_restarted=False tabs_readopted=2 login=survived"
    )
