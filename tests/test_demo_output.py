"""The fake-clock demo prints the seed's 18 example lines exactly."""

from __future__ import annotations

from pathlib import Path

from tests._demos import run_demo

EXPECTED = (Path(__file__).parent / "expected" / "seed_demo_output.txt").read_text()


def test_fake_clock_demo_prints_the_seed_output_exactly() -> None:
    """`python demos/fake_clock.py` on FakeBackend reproduces the seed's output line for line."""
    out = run_demo("fake_clock.py", timeout=60)
    assert out.stdout == EXPECTED
    assert len(out.stdout.splitlines()) == 18
    assert out.stderr == ""
