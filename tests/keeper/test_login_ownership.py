"""The ledger changes only on evidence of the caller's own sign-in (the agent boundary).

The jar is shared: a cookie of a site changes whenever its owner's pages make it change
(a re-issued CSRF or session cookie). Another conversation must not turn that change into
a login of its own, replacing the owner and its account.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from session_keeper import Durability, Grant, LoginSettings, SessionKeeper
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper.errors import LoginNotYours
from session_keeper.security import AuditLog, Keyring
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock, FakePage
from tests._chaos import record

pytestmark = pytest.mark.chaos

SITE = "billing.example"
KEYS = Keyring([("k1", bytes(range(32)))])

World = tuple[SessionKeeper[FakePage], FakeBackend]


@pytest.fixture
async def world() -> AsyncIterator[World]:
    """billing signed in to billing.example as alice; research holds a grant there."""
    backend = FakeBackend()
    keeper = SessionKeeper(
        backend,
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
        grants=[Grant("billing", SITE), Grant("research", SITE, actions={"read", "write"})],
    )
    async with keeper:
        await keeper.ensure("billing")
        await keeper.ensure("research")
        await keeper.ensure("intruder")
        await keeper.tab("billing", "http://billing.example/login")
        await backend.sign_in(SITE, name="billing_session")
        await keeper.record_login("billing", SITE, account="alice")
        yield keeper, backend


def _owner(keeper: SessionKeeper[FakePage]) -> tuple[str, str | None]:
    (record,) = keeper.logins()
    return record.owner, record.account


async def test_a_conversation_without_a_grant_cannot_replace_the_owners_login(
    world: World,
) -> None:
    """intruder (no grant) navigated there and a cookie changed (the owner's re-issue):
    LoginNotYours, the ledger still names billing/alice, and no act is admitted."""
    keeper, backend = world
    await keeper.tab("intruder", "http://billing.example/")
    await backend.sign_in(SITE, name="billing_csrf")  # the owner's page re-issues a cookie
    with pytest.raises(LoginNotYours, match="holds no grant to write"):
        await keeper.record_login("intruder", SITE, account="mallory")
    record("boundary", path="ledger rewrite by a conversation without a grant", attempts=1,
           arrived=int(_owner(keeper) != ("billing", "alice")))  # fmt: skip
    assert _owner(keeper) == ("billing", "alice")
    assert keeper.decide("intruder", SITE, "write").outcome == "block"


async def test_a_change_since_the_browser_started_is_not_the_callers_evidence(
    world: World,
) -> None:
    """research holds a grant but began no sign-in of its own: the owner's change since launch
    is not evidence; nothing recorded."""
    keeper, backend = world
    await backend.sign_in(SITE, name="billing_csrf")
    with pytest.raises(LoginNotYours, match="began no sign-in"):
        await keeper.record_login("research", SITE, account="bob")
    record("boundary", path="ledger rewrite from a change since launch", attempts=1,
           arrived=int(_owner(keeper) != ("billing", "alice")))  # fmt: skip
    assert _owner(keeper) == ("billing", "alice")


async def test_a_lost_login_is_not_taken_over_by_a_conversation_without_a_grant(
    world: World,
) -> None:
    """After a crash lost billing's login, the owner signs in again; intruder recording it
    first is refused, and billing records it as its own."""
    keeper, backend = world
    await backend.crash()
    await keeper.ensure("billing")
    await keeper.ensure("intruder")
    await keeper.tab("intruder", "http://billing.example/")
    await backend.sign_in(SITE, name="billing_session")
    with pytest.raises(LoginNotYours):
        await keeper.record_login("intruder", SITE, account="mallory")
    assert keeper.logins() == ()
    await keeper.begin_login("billing", SITE)
    await backend.sign_in(SITE, name="billing_session")
    await keeper.record_login("billing", SITE, account="alice")
    assert _owner(keeper) == ("billing", "alice")


async def test_a_grantee_signing_in_itself_replaces_the_login_and_says_so(tmp_path: Path) -> None:
    """research, with a grant, begins its own sign-in and a cookie changes in it: the login is
    replaced, and the audit chain records it as a replacement of billing's."""
    backend = FakeBackend()
    clock = FakeClock()
    async with SqliteStore(tmp_path / "k.db", clock=clock) as store:
        keeper = SessionKeeper(
            backend,
            clock=clock,
            durability=Durability(store=store, audit=AuditLog(store, KEYS, clock=clock)),
            login_settings=LoginSettings(fingerprint_key=bytes(32)),
            grants=[Grant("billing", SITE), Grant("research", SITE)],
        )
        async with keeper:
            await keeper.ensure("billing")
            await keeper.ensure("research")
            await keeper.tab("billing", "http://billing.example/login")
            await backend.sign_in(SITE, name="billing_session")
            await keeper.record_login("billing", SITE, account="alice")
            await keeper.begin_login("research", SITE)
            await backend.sign_in(SITE, name="billing_session")
            await keeper.record_login("research", SITE, account="bob")
            assert _owner(keeper) == ("research", "bob")
            await keeper.persist()
        bodies = [
            (e.data["type"], e.data["body"]) for e in await store.events(kind=AUDIT_ENTRY_KIND)
        ]
    replaced = [body for kind, body in bodies if kind == "login_replaced"]
    assert replaced == [
        {"site": SITE, "previous_owner": "billing", "owner": "research", "since": "begin_login"}
    ]
