"""``demos/many_profiles.py`` (the README's example) runs and prints what the pool did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = """\
chat-ana: profile ana, browser-1, restarted=False, lost nothing
chat-bo: profile bo, browser-1, restarted=False, lost nothing
chat-ana: profile ana, browser-2, restarted=True, lost tab:chat-ana
chat-bo: profile bo, browser-2, restarted=True, lost tab:chat-bo
open now: bo
"""


def run_demo(*args: str) -> str:
    return subprocess.run(
        [sys.executable, str(ROOT / "demos" / "many_profiles.py"), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=110,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    ).stdout


def test_many_profiles_demo_on_fake_browsers_routes_evicts_and_tells_once() -> None:
    """Two accounts on two profiles with one slot: each turn evicts the other profile,
    whose conversation is told restarted with its lost tab on its next turn."""
    assert run_demo("--fake") == EXPECTED


@pytest.mark.chromium
def test_many_profiles_demo_on_chromium_prints_the_same_story() -> None:
    """The same demo on two real Chromium profiles prints the same lines."""
    assert run_demo() == EXPECTED
