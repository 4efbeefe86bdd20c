"""``demos/many_profiles.py`` (the README's example) runs and prints what the pool did."""

from __future__ import annotations

import pytest

from tests._demos import run_demo

EXPECTED = """\
chat-ana: profile ana, browser-1, restarted=False, lost nothing
chat-bo: profile bo, browser-1, restarted=False, lost nothing
chat-ana: profile ana, browser-2, restarted=True, lost tab:chat-ana
chat-bo: profile bo, browser-2, restarted=True, lost tab:chat-bo
open now: bo
"""


def test_many_profiles_demo_on_fake_browsers_routes_evicts_and_tells_once() -> None:
    """Two accounts on two profiles with one slot: each turn evicts the other profile,
    whose conversation is told restarted with its lost tab on its next turn."""
    assert run_demo("many_profiles.py", "--fake", timeout=110).stdout == EXPECTED


@pytest.mark.chromium
def test_many_profiles_demo_on_chromium_prints_the_same_story() -> None:
    """The same demo on two real Chromium profiles prints the same lines."""
    assert run_demo("many_profiles.py", timeout=110).stdout == EXPECTED
