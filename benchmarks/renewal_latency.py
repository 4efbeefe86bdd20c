"""Row 22: from a server-side sign-out to a renewed login, against the health-check interval.

One keeper on real Chromium signs in to ``totp.example`` with its recipe (password, then a
TOTP code from the credential source), with ``RenewalPolicy(health_every=H)`` and its
sweeper running every ``--sweep`` seconds. Each round waits a random part of an interval,
signs the account out on the server (``LocalSites.expire_sessions``), and times until the
keeper holds a fresh login that the site serves the account on (the site's own log: a
renewal's sign-in is the only one). The figure is that time over ``H``, per round: a
sign-out is found by the next due check, jittered down by up to a fifth, so the ceiling is
one interval plus one sweep period and one renewal (goal ≤ 1.25× for the defaults here).

    RESULT renewal_s_median=... interval_s=... ratio_median=... renewals=N human_asks=0

Usage: ``python benchmarks/renewal_latency.py [--rounds 8] [--interval 4] [--sweep 0.25]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from playwright.async_api import Page

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._report import emit
from session_keeper import (
    Grant,
    LoginSettings,
    PlaywrightBackend,
    RenewalPolicy,
    SessionKeeper,
)
from session_keeper.testing import LocalSites
from session_keeper.testing._login_sites import totp_credentials, totp_recipe

SITE = "totp.example"
OWNER = "alice-chat"


async def whoami(page: Page) -> str | None:
    """The site's own word on who is signed in (the LoginProbe)."""
    answer = await page.goto(f"http://{SITE}/whoami")
    assert answer is not None
    account: str | None = (await answer.json())["account"]
    return account


async def run(rounds: int, interval: float, sweep: float) -> tuple[list[float], list[float]]:
    """Per round: seconds from the sign-out to the renewed login, and the renewal's own."""
    credentials = totp_credentials()
    waits: list[float] = []
    renewals: list[float] = []
    with LocalSites() as sites, tempfile.TemporaryDirectory(prefix="renewal-bench-") as tmp:
        backend = PlaywrightBackend(
            Path(tmp) / "profile", host_resolver_rules=sites.host_resolver_rules
        )
        keeper: SessionKeeper[Page] = SessionKeeper(
            backend,
            grants=[Grant(OWNER, SITE, actions={"read", "write"})],
            login_settings=LoginSettings(
                fingerprint_key=bytes(range(32)),
                probes={SITE: whoami},
                recipes={SITE: totp_recipe()},
                credentials=credentials,
                renewal=RenewalPolicy(
                    attempts=2, backoff=timedelta(0), health_every=timedelta(seconds=interval)
                ),
            ),
        )
        async with keeper:
            await keeper.ensure(OWNER)
            first = await keeper.renew_login(OWNER, SITE)
            assert first.outcome == "renewed", first
            keeper.start_sweeper(every=timedelta(seconds=sweep))
            rng = random.Random(22)
            for _ in range(rounds):
                await asyncio.sleep(rng.uniform(0, interval))
                before = keeper.logins()[0].recorded_at
                mark = len(sites.served(SITE))
                sites.expire_sessions(SITE)
                t0 = time.monotonic()
                started: float | None = None
                while True:
                    served = sites.served(SITE)[mark:]
                    if started is None and any(p == "/login" for p, _ in served):
                        started = time.monotonic()  # the renewal's first request
                    records = keeper.logins()
                    if records and records[0].recorded_at != before:
                        break
                    assert time.monotonic() - t0 < 10 * interval + 30, "never renewed"
                    await asyncio.sleep(0.02)
                done = time.monotonic()
                waits.append(done - t0)
                renewals.append(done - (started if started is not None else t0))
                assert await whoami(await keeper.unguarded_page(OWNER)) == "alice"
    return waits, renewals


def main() -> None:
    """Run the rounds; emit the BENCH record and a RESULT line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--interval", type=float, default=4.0)
    parser.add_argument("--sweep", type=float, default=0.25)
    args = parser.parse_args()
    waits, renewals = asyncio.run(run(args.rounds, args.interval, args.sweep))
    ratios = [w / args.interval for w in waits]
    emit(
        "22",
        compared=(
            f"server-side sign-out -> renewed login (recipe + TOTP) vs the health interval "
            f"({args.interval:g} s, sweep every {args.sweep:g} s)"
        ),
        ratios=ratios,
        goal=1.25,
        direction="<=",
        detail=(
            f"sign-out to renewed {statistics.median(waits):.2f} s median, max {max(waits):.2f} s;"
            f" the renewal itself {statistics.median(renewals):.2f} s median"
        ),
    )
    print(
        f"RESULT renewal_s_median={statistics.median(waits):.2f} interval_s={args.interval:g} "
        f"ratio_median={statistics.median(ratios):.2f} renewals={len(waits)} human_asks=0"
    )


if __name__ == "__main__":
    main()
