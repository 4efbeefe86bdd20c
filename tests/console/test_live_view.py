"""A person in a second browser signs a headless job back in through the console."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from demos.guard_attacks import search_canaries
from demos.human_handoff import handoff
from demos.sites import DemoSites
from tests._demos import run_demo

# Two Chromiums, a kill and a 24-page audit: a few seconds here, more on a loaded runner.
pytestmark = [pytest.mark.chromium, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


async def test_a_person_signs_in_through_the_live_view_and_the_paused_job_completes(
    tmp_path: Path, chromium_path: str, artifacts: Path
) -> None:
    """The job pauses on a lost login; the person types the sign-in through the console's
    streamed page, presses done; the job resumes, re-verifies and every record validates."""
    with DemoSites() as sites:
        result = await handoff(
            sites, tmp_path, chromium=chromium_path, artifacts=artifacts, out=lambda _: None
        )
    assert result.result_line() == (
        "RESULT paused=1 signed_in_via_console=1 resumed=1 validated=true"
    )
    assert result.final_state == "done"
    assert result.records == 240
    # The hand-off is in the audit chain (verified): the takeover, then the login.
    assert result.takeovers_audited >= 1
    assert result.audit_entries > 0
    for name in ("overview", "browsers", "conversations", "logins", "borrows", "jobs", "events"):
        assert (artifacts / f"{name}.png").stat().st_size > 0
    assert (artifacts / "live.png").stat().st_size > 0
    # Canary over every page and API answer the person got: the browser's cookie values,
    # the keyring key and the typed password appear nowhere (raw, hex or base64).
    assert len(result.pages) >= 9
    assert any(name.startswith("cookie") for name in result.secrets)
    assert b"catalogue.example" in result.pages["logins"]  # the ledger rows were shown
    assert search_canaries(result.secrets, result.pages) == []


@pytest.mark.slow
def test_the_human_handoff_demo_ends_with_its_result_line() -> None:
    """``python demos/human_handoff.py`` runs headless and ends with the expected RESULT."""
    lines = run_demo("human_handoff.py", timeout=280).stdout.splitlines()
    assert lines[-1] == "RESULT paused=1 signed_in_via_console=1 resumed=1 validated=true"
    assert any("SIGKILL the browser process" in line for line in lines)
    assert any("awaiting_human" in line for line in lines)


def test_closing_a_live_view_while_keys_arrive_prints_no_traceback_ten_times() -> None:
    """Ten live views closed while the person's keys and their frames are in flight (what
    the console guide's program met in 4 of 11 runs): stderr stays empty of tracebacks."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "console" / "_live_closes.py"), "10"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["10 live views closed"]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "Exception in ASGI application" not in out.stderr
