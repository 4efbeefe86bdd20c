"""The seed's two demos, run through the production SessionKeeper.

    python demos/fake_clock.py          # FakeBackend: an in-memory browser
    python demos/fake_clock.py --real   # real Chromium against local test sites

A fake clock drives the minutes in both. Every line printed is formatted from what
the keeper returned (turn facts, decisions, sweep reports, login records); the
steps, grants and notes are the seed's example inputs.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Literal, Protocol

import attrs

from session_keeper import Grant, IdleTimeouts, SessionKeeper
from session_keeper.testing import FakeBackend, FakeClock

Action = Literal["open", "login", "act", "sweep", "crash"]


@attrs.frozen(kw_only=True)
class Step:
    """One step of the seed's demos."""

    minute: int
    conversation: str
    action: Action
    site: str | None = None
    note: str | None = None
    assumes_login: bool = False
    #: What an ``act`` step does with the login: read data or change something.
    kind: Literal["read", "write"] = "read"


GRANTS = (Grant("billing", "billing.example"),)

DEMO_1 = (
    "Demo 1: one login, two conversations",
    (
        Step(minute=0, conversation="billing", action="login", site="billing.example"),
        Step(minute=4, conversation="billing", action="act", site="billing.example",
             note="download September invoice"),
        Step(minute=6, conversation="research", action="open", site="docs.example"),
        Step(minute=7, conversation="research", action="act", site="billing.example",
             note="export customer list"),
        Step(minute=9, conversation="billing", action="act", site="billing.example",
             note="update card on file", kind="write"),
    ),
)  # fmt: skip

DEMO_2 = (
    "Demo 2: the browser does not wait for you",
    (
        Step(minute=0, conversation="billing", action="login", site="billing.example"),
        Step(minute=3, conversation="billing", action="act", site="billing.example",
             note="download September invoice"),
        Step(minute=15, conversation="ops", action="sweep"),
        Step(minute=18, conversation="billing", action="act", site="billing.example",
             note="submit refund", assumes_login=True, kind="write"),
        Step(minute=19, conversation="billing", action="login", site="billing.example",
             note="human signed in again"),
        Step(minute=20, conversation="billing", action="act", site="billing.example",
             note="submit refund", kind="write"),
        Step(minute=22, conversation="ops", action="crash"),
        Step(minute=23, conversation="billing", action="act", site="billing.example",
             note="check refund status", assumes_login=True),
    ),
)  # fmt: skip


class World(Protocol):
    """What differs between the fake run and the real one: the browser and the sites."""

    def new_backend(self) -> Any:
        """A fresh backend (a fresh profile) for one demo."""
        ...

    def url(self, site: str, path: str) -> str:
        """The URL of ``path`` on ``site``."""
        ...

    async def human_signs_in(
        self, keeper: SessionKeeper[Any], conversation: str, site: str
    ) -> None:
        """Play the human finishing a sign-in in the conversation's tab."""
        ...

    async def act(self, page: Any, site: str, step: Step) -> None:
        """Do the step's side effect on the page (only after the keeper said ``act``)."""
        ...

    async def crash(self, backend: Any, keeper: SessionKeeper[Any]) -> None:
        """Kill the live browser and wait until the keeper has heard about it."""
        ...


class FakeWorld:
    """FakeBackend: sign-in puts a session cookie in the jar; a crash kills the fake browser."""

    def new_backend(self) -> FakeBackend:
        return FakeBackend()

    def url(self, site: str, path: str) -> str:
        return f"https://{site}{path}"

    async def human_signs_in(
        self, keeper: SessionKeeper[Any], conversation: str, site: str
    ) -> None:
        backend = keeper_backend(keeper)
        assert isinstance(backend, FakeBackend)
        await backend.sign_in(site)

    async def act(self, page: Any, site: str, step: Step) -> None:
        await page.goto(self.url(site, "/invoices" if step.kind == "read" else "/account"))

    async def crash(self, backend: Any, keeper: SessionKeeper[Any]) -> None:
        await backend.crash()


class RealWorld:
    """Real Chromium (PlaywrightBackend) against the local test sites.

    The human's sign-in is a scripted form login; a side effect is a real request
    from the conversation's page; a crash is a real SIGKILL of the browser process.
    Each demo gets a fresh profile.
    """

    USERNAME = "billing-human"

    def __init__(self, sites: Any = None, password: str | None = None) -> None:
        import secrets

        from session_keeper.testing import LocalSites

        self._password = password or secrets.token_urlsafe(12)
        self._own_sites = sites is None
        self.sites = sites or LocalSites(billing_accounts={self.USERNAME: self._password})
        self._tmp: Any = None
        self._profiles = 0

    async def __aenter__(self) -> RealWorld:
        import tempfile

        self._tmp = tempfile.TemporaryDirectory(prefix="session-keeper-demo-")
        if self._own_sites:
            self.sites.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._own_sites:
            self.sites.stop()
        self._tmp.cleanup()

    @property
    def password(self) -> str:
        """The billing password the scripted human types."""
        return self._password

    def new_backend(self) -> Any:
        from pathlib import Path

        from session_keeper import PlaywrightBackend

        self._profiles += 1
        profile = Path(self._tmp.name) / f"profile-{self._profiles}"
        return PlaywrightBackend(profile, host_resolver_rules=self.sites.host_resolver_rules)

    def url(self, site: str, path: str) -> str:
        return str(self.sites.url(site, path))

    async def human_signs_in(
        self, keeper: SessionKeeper[Any], conversation: str, site: str
    ) -> None:
        page = await keeper.unguarded_page(conversation)
        await page.fill("input[name=username]", self.USERNAME)
        await page.fill("input[name=password]", self._password)
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        if not page.url.endswith("/invoices"):
            raise RuntimeError(f"scripted sign-in to {site} did not reach the invoices page")
        keeper.mark_verified(conversation)

    async def act(self, page: Any, site: str, step: Step) -> None:
        note = step.note or ""
        if "refund" in note:
            call = "fetch('/refund', {method: 'POST', body: new URLSearchParams("
            call += "{idempotency_key: 'demo-refund-1', amount: '12.00'})}).then(r => r.status)"
        elif step.kind == "write":
            call = "fetch('/card', {method: 'POST', body: new URLSearchParams("
            call += "{card: '4242424242424242'})}).then(r => r.status)"
        else:
            call = "fetch('/invoices').then(r => r.status)"
        status = await page.evaluate(call)
        if status not in (200, 201):
            raise RuntimeError(f"{note} on {site} answered HTTP {status}: the login did not work")

    async def crash(self, backend: Any, keeper: SessionKeeper[Any]) -> None:
        session = backend.current
        if session is not None:
            await session.kill()  # a real SIGKILL; returns once the death was observed
        if keeper.alive:
            raise RuntimeError("the keeper did not notice the browser's death")


def keeper_backend(keeper: SessionKeeper[Any]) -> Any:
    """The backend a keeper was built with (the demo's worlds need it to play the human)."""
    return keeper.backend


def minute_stamp(clock: FakeClock) -> str:
    """The seed's ``t+MMm`` time stamp, from the fake clock."""
    return f"t+{round(clock.elapsed.total_seconds() / 60):02d}m"


async def run_turn(
    keeper: SessionKeeper[Any],
    clock: FakeClock,
    world: World,
    step: Step,
    out: Callable[[str], None],
) -> None:
    """One seed step: set the clock, ask the keeper, print what it said."""
    clock.set(timedelta(minutes=step.minute))
    at = minute_stamp(clock)
    if step.action == "sweep":
        report = await keeper.sweep()
        closed = report.closed_browser
        said = (
            f"{closed.browser_id} idle {closed.idle_minutes}m, closed" if closed else "nothing idle"
        )
        out(f"{at} [SWEEP] {said}")
        return
    if step.action == "crash":
        await world.crash(keeper_backend(keeper), keeper)
        out(f"{at} [CRASH] browser died (simulated)")
        return
    turn = await keeper.ensure(step.conversation)
    head = f"{at} {step.conversation:<8}"
    if turn.restarted:
        lost = ", ".join(str(x) for x in turn.lost) or "nothing"
        out(f"{head} [RESTART] {turn.browser_id} restarted: true, lost {lost}")
    assert step.site is not None
    if step.action == "open":
        await keeper.unguarded_page(step.conversation, world.url(step.site, "/"))
        out(f"{head} [OPEN ] {step.site} in {turn.browser_id}")
        return
    if step.action == "login":
        await keeper.unguarded_page(step.conversation, world.url(step.site, "/login"))
        await world.human_signs_in(keeper, step.conversation, step.site)
        record = await keeper.record_login(step.conversation, step.site)
        out(f"{head} [LOGIN] {record.site} ({step.note or 'human finished sign-in'})")
        return
    decision = keeper.decide(
        step.conversation, step.site, step.kind, assumes_login=step.assumes_login
    )
    if decision.outcome == "stop":
        out(f"{head} [STOP ] {step.note}: {decision.reason}")
        return
    if decision.outcome != "act":
        out(f"{head} [BLOCK] {step.note}: {decision.reason}")
        return
    kept = keeper.has_tab(step.conversation)
    page = await keeper.unguarded_page(step.conversation)
    await world.act(page, step.site, step)
    out(f"{head} [ACT  ] {step.note} on {step.site} ({'tab kept' if kept else 'tab opened'}, "
        f"{turn.browser_id})")  # fmt: skip


async def run_demo(
    title: str, steps: Sequence[Step], world: World, out: Callable[[str], None]
) -> None:
    """One seed demo on a fresh keeper, backend and clock."""
    out(f"=== {title} ===")
    clock = FakeClock()
    async with SessionKeeper(
        world.new_backend(),
        clock=clock,
        grants=GRANTS,
        idle_timeouts=IdleTimeouts(browser=timedelta(minutes=10)),
    ) as keeper:
        for step in steps:
            await run_turn(keeper, clock, world, step, out)


async def main_async(real: bool, out: Callable[[str], None]) -> None:
    """Run both demos in the chosen world."""
    if real:
        async with RealWorld() as world:
            await run_demos(world, out)
        return
    await run_demos(FakeWorld(), out)


async def run_demos(world: World, out: Callable[[str], None]) -> None:
    """Both demos, a blank line between them, as the seed prints them."""
    for i, (title, steps) in enumerate((DEMO_1, DEMO_2)):
        if i:
            out("")
        await run_demo(title, steps, world, out)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="real Chromium against local sites")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.real, print))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
