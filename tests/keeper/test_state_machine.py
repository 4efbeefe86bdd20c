"""A model-based test: random turns, logins, grants, sweeps, crashes and clock jumps.

An independent model of the browser (jar, profile, tabs) and of the keeper's promises
is checked after every step:

(a) after a restart every affected conversation gets ``restarted=True`` exactly once,
    with exactly what it lost, and no unaffected one does;
(b) ``decide`` never answers ``act`` without a live grant and a present login;
(c) nothing in ``lost`` still exists;
(d) a browser used within the idle limit is never swept;
(e) another conversation's login (live or lost) is replaced only by a write grantee's own
    sign-in.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from session_keeper import Grant, IdleTimeouts, LoginSettings, SessionKeeper
from session_keeper.errors import BrowserGoneError, LoginNotYours
from session_keeper.testing import FakeBackend, FakeClock, FakePage

CONVERSATIONS = ("a", "b")
SITES = ("billing.example", "docs.example")
IDLE = timedelta(minutes=10)

conversations = st.sampled_from(CONVERSATIONS)
sites = st.sampled_from(SITES)
actions = st.sampled_from(("read", "write"))


@attrs.define
class ModelGrant:
    conversation: str
    site: str
    actions: frozenset[str]
    expires_at: float | None  # seconds on the fake clock
    uses_left: int | None

    def live(self, now: float) -> bool:
        return (self.expires_at is None or now < self.expires_at) and (
            self.uses_left is None or self.uses_left > 0
        )


@attrs.define
class ModelLogin:
    owner: str
    value: str
    persistent: bool


class KeeperMachine(RuleBasedStateMachine):
    """Drives a SessionKeeper on FakeBackend + FakeClock against a model of both."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.backend = FakeBackend()
        self.keeper: SessionKeeper[FakePage]
        self.keep_logins = False
        # Model of the world.
        self.generation = 0
        self.alive = False
        self.last_used = 0.0
        self.jar: dict[str, tuple[str, bool]] = {}  # site -> (value, persistent)
        self.profile: dict[str, str] = {}  # persistent cookies flushed to disk
        self.tabs: set[str] = set()
        self.logins: dict[str, ModelLogin] = {}
        self.grants: list[ModelGrant] = []
        self.owed: dict[str, set[str]] = {}  # conversation -> lost items it must hear of
        self.lost_values: dict[str, set[str]] = {}  # site -> cookie values of lost logins
        self.lost_owner: dict[str, str] = {}  # site -> owner of its lost login

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def now(self) -> float:
        return self.clock.monotonic()

    @initialize(keep=st.booleans())
    def start(self, keep: bool) -> None:
        self.keep_logins = keep
        self.keeper = SessionKeeper(
            self.backend,
            clock=self.clock,
            idle_timeouts=IdleTimeouts(browser=IDLE),
            login_settings=LoginSettings(keep_on_idle_close=keep),
            grants=[Grant("a", "billing.example")],
        )
        self.grants.append(
            ModelGrant("a", "billing.example", frozenset({"read", "write"}), None, None)
        )

    def teardown(self) -> None:
        self.run(self.keeper.aclose())
        self.loop.close()

    # -- model helpers ------------------------------------------------------------------
    def idle_expired(self) -> bool:
        return self.now() - self.last_used > IDLE.total_seconds()

    def usable(self, conversation: str) -> bool:
        return self.alive and not self.idle_expired() and conversation not in self.owed

    def close_browser(self, *, idle: bool) -> None:
        """Model a clean close (idle policy applied) of the live browser."""
        if idle and not self.keep_logins:
            for site in self.logins:
                self.jar.pop(site, None)
        self.profile = {s: v for s, (v, persistent) in self.jar.items() if persistent}
        self.alive = False

    def model_restart(self) -> None:
        """What a relaunch does, computed from the model alone."""
        if self.alive:  # idle-expired: the keeper closes it first
            self.close_browser(idle=True)
        old_generation = self.generation
        self.generation += 1
        self.alive = True
        self.jar = {s: (v, True) for s, v in self.profile.items()}
        if not old_generation:
            return
        now = self.now()
        for site, login in list(self.logins.items()):
            holders = {g.conversation for g in self.grants if g.site == site and g.live(now)}
            recipients = {login.owner} | holders
            survived = self.jar.get(site, (None, False))[0] == login.value
            for c in recipients:
                self.owed.setdefault(c, set())
                if not survived:
                    self.owed[c].add(f"login:{site}")
            if not survived:
                self.lost_values.setdefault(site, set()).add(login.value)
                self.lost_owner[site] = login.owner
                del self.logins[site]
        for c in self.tabs:
            self.owed.setdefault(c, set()).add(f"tab:{c}")
        self.tabs.clear()

    # -- rules ------------------------------------------------------------------------
    @rule(conversation=conversations, open_tab=st.booleans())
    def turn(self, conversation: str, open_tab: bool) -> None:
        if not self.alive or self.idle_expired():
            self.model_restart()
        facts = self.run(self.keeper.ensure(conversation))
        self.last_used = self.now()
        assert facts.generation == self.generation
        owed = self.owed.pop(conversation, None)
        # (a) exactly once, to exactly the affected, with exactly what they lost.
        assert facts.restarted == (owed is not None), (conversation, facts, owed)
        assert {str(x) for x in facts.lost} == (owed or set())
        # (c) nothing reported lost still exists.
        jar = {c.domain: c.value for c in self.run(self.backend.current.cookies())}  # type: ignore[union-attr]
        for lost in facts.lost:
            if lost.kind == "login":
                assert jar.get(lost.name) not in self.lost_values[lost.name] - {None}
                assert lost.generation < facts.generation
            else:
                assert lost.name == conversation and lost.generation < facts.generation
        if open_tab:
            self.run(
                self.keeper.unguarded_page(conversation, f"https://docs.example/{conversation}")
            )
            self.tabs.add(conversation)

    @rule(conversation=conversations, site=sites, persistent=st.booleans())
    def login(self, conversation: str, site: str, persistent: bool) -> None:
        if not self.usable(conversation):
            try:
                self.run(self.keeper.unguarded_page(conversation, f"https://{site}/login"))
            except BrowserGoneError:
                return
            raise AssertionError("tab() worked on a browser the model says is unusable")
        self.run(self.keeper.unguarded_page(conversation, f"https://{site}/login"))
        cookie = self.run(self.backend.sign_in(site, persistent=persistent))
        self.last_used = self.now()
        self.tabs.add(conversation)
        self.jar[site] = (cookie.value, persistent)
        owner = self.logins[site].owner if site in self.logins else self.lost_owner.get(site)
        granted = any(
            g.conversation == conversation
            and g.site == site
            and "write" in g.actions
            and g.live(self.now())
            for g in self.grants
        )
        if owner not in (None, conversation) and not granted:
            # (e) another conversation's login is replaced only by a grantee's own sign-in.
            with pytest.raises(LoginNotYours):
                self.run(self.keeper.record_login(conversation, site))
            return
        self.run(self.keeper.record_login(conversation, site))
        self.lost_owner.pop(site, None)
        self.logins[site] = ModelLogin(conversation, cookie.value, persistent)

    @rule(
        conversation=conversations,
        site=sites,
        kind=st.sampled_from(("unlimited", "read-only", "expiring", "one-time")),
        minutes=st.integers(1, 20),
    )
    def grant(self, conversation: str, site: str, kind: str, minutes: int) -> None:
        now = self.now()
        if kind == "one-time":
            self.keeper.approve_borrow(conversation, site, "write", approved_by="human")
            self.grants.append(ModelGrant(conversation, site, frozenset({"write"}), None, 1))
            return
        acts = frozenset({"read"}) if kind == "read-only" else frozenset({"read", "write"})
        expires = minutes * 60.0 if kind == "expiring" else None
        self.keeper.grant(
            Grant(
                conversation,
                site,
                actions=acts,
                expires_at=self.clock.now() + timedelta(minutes=minutes) if expires else None,
            )
        )
        self.grants.append(
            ModelGrant(conversation, site, acts, now + expires if expires else None, None)
        )

    @rule(conversation=conversations, site=sites, action=actions, assumes=st.booleans())
    def decide(self, conversation: str, site: str, action: str, assumes: bool) -> None:
        d = self.keeper.decide(conversation, site, action, assumes_login=assumes)
        now = self.now()
        live = [
            g
            for g in self.grants
            if g.conversation == conversation
            and g.site == site
            and action in g.actions
            and g.live(now)
        ]
        present = self.usable(conversation) and site in self.logins
        # (b) no act without a live grant and a present login.
        if d.outcome == "act":
            assert present and live, (d, present, live)
            # The keeper spends unlimited grants first, then the soonest-expiring counted one.
            live.sort(key=lambda g: (g.uses_left is not None, g.expires_at or float("inf")))
            if live[0].uses_left is not None:
                live[0].uses_left -= 1
        else:
            assert not (present and live), (d, present, live)

    @rule(conversation=conversations, site=sites, action=actions)
    def borrow_then_act_twice(self, conversation: str, site: str, action: str) -> None:
        """A human approves a one-time borrow; the agent tries to use it twice."""
        self.keeper.approve_borrow(conversation, site, action, approved_by="human")
        self.grants.append(ModelGrant(conversation, site, frozenset({action}), None, 1))
        self.decide(conversation, site, action, assumes=False)
        self.decide(conversation, site, action, assumes=False)

    @rule()
    def sweep(self) -> None:
        used_recently = not self.idle_expired()
        was_alive = self.alive
        report = self.run(self.keeper.sweep())
        now = self.now()
        self.grants = [g for g in self.grants if g.live(now)]
        # (d) a browser used within the idle limit is never swept.
        if used_recently or not was_alive:
            assert report.closed_browser is None
        else:
            assert report.closed_browser is not None
            assert report.closed_browser.generation == self.generation
            self.close_browser(idle=True)

    @rule()
    def crash(self) -> None:
        self.run(self.backend.crash())
        self.alive = False  # SIGKILL: nothing reaches the profile

    @rule(minutes=st.sampled_from((0, 1, 4, 9, 11)))
    def advance(self, minutes: int) -> None:
        self.clock.advance(timedelta(minutes=minutes))

    @invariant()
    def liveness_agrees(self) -> None:
        if hasattr(self, "keeper"):
            assert self.keeper.alive == (self.alive and not self.idle_expired())


KeeperMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SESSION_KEEPER_STATEFUL_EXAMPLES", "500")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_keeper_state_machine = KeeperMachine.TestCase
test_keeper_state_machine.__doc__ = "Random turns keep promises (a)-(d) of the module docstring."
