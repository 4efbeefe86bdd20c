"""The seed's demos on real Chromium print the same 18 lines, and the sites agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from demos.fake_clock import RealWorld, run_demos
from session_keeper.testing import LocalSites
from tests._demos import run_demo

pytestmark = pytest.mark.chromium

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = (ROOT / "tests" / "expected" / "seed_demo_output.txt").read_text()


@pytest.mark.timeout(240)  # above the subprocess's own 180 s bound, which reports stderr
def test_real_demo_command_prints_the_seed_output(chromium_path: str) -> None:
    """`python demos/fake_clock.py --real` prints the seed's 18 lines exactly."""
    assert run_demo("fake_clock.py", "--real", timeout=180).stdout == EXPECTED


async def test_real_demo_fires_exactly_one_refund_and_only_after_the_new_sign_in(
    chromium_path: str,
) -> None:
    """The stopped refund never reached billing.example; the allowed one arrived once, signed in."""
    lines: list[str] = []
    with LocalSites(billing_accounts={RealWorld.USERNAME: "pw-for-this-test"}) as sites:
        async with RealWorld(sites, password="pw-for-this-test") as world:
            await run_demos(world, lines.append)
        refunds = [r for r in sites.requests("billing.example") if r.path == "/refund"]
        card_updates = [r for r in sites.requests("billing.example") if r.path == "/card"]
    assert "\n".join(lines) + "\n" == EXPECTED
    assert sites.refund_count() == 1
    assert len(refunds) == 1 and refunds[0].cookie("billing_session") is not None
    assert len(card_updates) == 1 and card_updates[0].cookie("billing_session") is not None
