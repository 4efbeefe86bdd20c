"""The catalogue audit demo: two real kills, and an independent validator says nothing was lost."""

from __future__ import annotations

import re

import pytest

from tests._demos import run_demo

# Above the demo's own 600 s bound, so that bound fires first and shows the demo's output
# (about 10 s here; two kills and relaunches on a loaded machine take several times more).
pytestmark = [pytest.mark.chromium, pytest.mark.slow, pytest.mark.timeout(660)]


def test_catalogue_audit_survives_a_browser_kill_and_a_worker_kill(chromium_path: str) -> None:
    """The demo ends validated: 0 lost, 0 duplicated (measured), 0 false completions."""
    lines = run_demo("catalogue_audit.py", timeout=600).stdout.splitlines()
    # Duplicates are measured (already_present, commits per page); re-extraction depends
    # on where the kills land, so it is reported, not fixed.
    assert re.fullmatch(
        r"RESULT pages=24 records=240 lost=0 duplicated=0 duplicate_commits=0 "
        r"re_extracted=\d+ false_completions=0 validated=true",
        lines[-1],
    ), lines[-1]
    assert any("SIGKILL the browser process" in line for line in lines)
    assert any("SIGKILL worker-2 itself" in line for line in lines)
    assert any("awaiting_human" in line for line in lines)
