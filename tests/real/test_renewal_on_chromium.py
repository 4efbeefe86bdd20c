"""Renewal on real Chromium: a recipe, sealed credentials and a TOTP second factor sign
totp.example in again after a server-side expiry, once however many ask, bounded when
the site refuses, and never with a value out of place."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
import pytest_asyncio
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from mcp.client.client import Client
from playwright.async_api import Page

from demos.guard_attacks import search_canaries
from session_keeper import (
    ConversationTab,
    Durability,
    Grant,
    LoginSettings,
    RenewalPolicy,
    ScriptRecipe,
    SessionKeeper,
    SignInAnswer,
)
from session_keeper.errors import PageChanged, RenewalRefused, SealBroken, SessionKeeperError
from session_keeper.facts import TurnFacts
from session_keeper.integrations.langgraph import BrowserState, browser_node
from session_keeper.jobs import Accepted, JobContract, JobLoop, StepContext
from session_keeper.mcp import KeeperMCP
from session_keeper.security import (
    AuditLog,
    Credentials,
    EnvCredentials,
    Keyring,
    SealedCredentials,
)
from session_keeper.stores import SqliteStore
from session_keeper.testing import LocalSites, job_loop_testing
from session_keeper.testing._login_sites import (
    TOTP_ITEM_PAGES,
    TOTP_PASSWORD,
    TOTP_SECRET,
    totp_credentials,
    totp_recipe,
)
from tests._demos import run_demo

from .._chaos import record
from ..conftest import BackendFactory, shared_driver_backend
from ..mcp.conftest import call, restart, text

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

SITE = "totp.example"
OWNER = "alice-chat"

RECIPE = totp_recipe(timeout=timedelta(seconds=5))


async def whoami(page: Page) -> str | None:
    """totp.example's own word on who is signed in."""
    answer = await page.goto(f"http://{SITE}/whoami")
    assert answer is not None
    account: str | None = (await answer.json())["account"]
    return account


def posts(sites: LocalSites, path: str, since: int) -> int:
    """How many sign-in POSTs to ``path`` totp.example got after request ``since``."""
    return sum(1 for r in sites.requests(SITE)[since:] if r.method == "POST" and r.path == path)


@attrs.frozen(kw_only=True)
class World:
    keeper: SessionKeeper[Page]
    store: SqliteStore
    keyring: Keyring
    vault: SealedCredentials
    db: Path


@pytest_asyncio.fixture(loop_scope="module")
async def world(
    playwright_backend: BackendFactory, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[World]:
    """A keeper whose credentials for totp.example are sealed in its own SQLite store."""
    db = tmp_path / "keeper.db"
    keyring = Keyring.generate()
    credentials = getattr(request, "param", None)
    async with SqliteStore(str(db)) as store:
        vault = SealedCredentials(store, keyring)
        await vault.set(SITE, "username", "alice")
        await vault.set(SITE, "password", TOTP_PASSWORD)
        await vault.set(SITE, "totp", TOTP_SECRET)
        keeper: SessionKeeper[Page] = SessionKeeper(
            playwright_backend(),
            grants=[
                Grant(OWNER, SITE),
                *(Grant(f"grantee-{i}", SITE, actions={"read"}) for i in range(6)),
            ],
            login_settings=LoginSettings(
                fingerprint_key=bytes(range(32)),
                probes={SITE: whoami},
                recipes={SITE: RECIPE},
                credentials=credentials if credentials is not None else vault,
                renewal=RenewalPolicy(attempts=3, backoff=timedelta(0)),
            ),
            durability=Durability(store=store, keyring=keyring, audit=AuditLog(store, keyring)),
        )
        async with keeper:
            await keeper.ensure(OWNER)
            yield World(keeper=keeper, store=store, keyring=keyring, vault=vault, db=db)


async def audit_entries(world: World, type_: str) -> list[dict[str, Any]]:
    """The bodies of the audit entries of ``type_``, oldest first (all written first)."""
    await world.keeper.persist()
    return [
        dict(e.data["body"])  # type: ignore[call-overload]
        for e in await world.store.events(kind="audit", limit=10_000)
        if e.data.get("type") == type_
    ]


async def test_a_server_side_expiry_is_renewed_from_the_vault_with_a_totp_code(
    world: World, sites: LocalSites, caplog: pytest.LogCaptureFixture
) -> None:
    """Signed in, expired by the server, signed in again by the recipe: 0 human asks, the
    site's own word is alice, and the password and TOTP secret are nowhere stored or told."""
    caplog.set_level(logging.DEBUG, logger="session_keeper")
    keeper, errors = world.keeper, []
    first = await keeper.renew_login(OWNER, SITE)
    assert (first.outcome, first.attempts, first.account) == ("renewed", 1, "alice")
    sites.expire_sessions(SITE)
    page = await keeper.unguarded_page(OWNER)
    assert await whoami(page) is None  # the server no longer honours the cookie
    since = len(sites.requests(SITE))
    again = await keeper.renew_login(OWNER, SITE)
    assert (again.outcome, again.needs_human, again.account) == ("renewed", False, "alice")
    assert posts(sites, "/login/code", since) == 1
    assert await whoami(await keeper.unguarded_page(OWNER)) == "alice"
    assert [r.owner for r in keeper.logins()] == [OWNER]
    turn = await keeper.ensure(OWNER)
    assert [str(x) for x in turn.lost_logins] == [f"login:{SITE}"]  # told, then renewed
    assert turn.renewed == (SITE,)
    assert "renewed" in turn.to_prompt() and "until a human signs in" not in turn.to_prompt()
    assert (await keeper.ensure(OWNER)).renewed == ()  # told once
    attempts = await audit_entries(world, "login_renewal_attempt")
    assert [a["asked_by"] for a in attempts] == [OWNER, OWNER]
    try:
        await keeper.renew_login("stranger", SITE)
    except SessionKeeperError as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    await keeper.persist()
    events = await world.store.events(limit=10_000)
    hits = search_canaries(
        {"password": TOTP_PASSWORD, "totp secret": TOTP_SECRET},
        {
            "sqlite": b"".join(p.read_bytes() for p in world.db.parent.glob("keeper.db*")),
            "events": repr([e.to_dict() for e in events]).encode(),
            "logs": "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records).encode(),
            "errors": "\n".join(errors).encode(),
            "renewals": repr([first, again]).encode(),
        },
    )
    assert errors[0].startswith("RenewalRefused: stranger may not renew")
    assert caplog.records  # the scan is not hollow
    assert hits == []


async def test_a_loss_after_a_renewal_not_told_yet_is_told_as_a_loss(
    world: World, sites: LocalSites
) -> None:
    """A renewal held back for the owner's next turn, then the site signs out and a second
    renewal is refused (a wrong password in the vault: refused before any code, so no wait
    for a fresh TOTP window): that turn tells the loss, newest state last, in its text as
    in its facts, word for word."""
    keeper = world.keeper
    await keeper.ensure(OWNER)
    assert (await keeper.renew_login(OWNER, SITE)).outcome == "renewed"
    sites.expire_sessions(SITE)
    await world.vault.set(SITE, "password", "not alice's password")
    refused = await keeper.renew_login(OWNER, SITE)
    assert (refused.outcome, refused.needs_human) == ("refused", True)
    assert await whoami(await keeper.unguarded_page(OWNER)) is None  # the site's word
    turn = await keeper.ensure(OWNER)
    assert [str(x) for x in turn.lost_logins] == [f"login:{SITE}"]
    assert turn.renewed == ()
    assert turn.to_prompt() == (
        f"Browser {turn.browser_id}: the same browser, but since your last turn:\n"
        f"- Lost login to {SITE} (owner {OWNER}): signed out by the site. "
        "Do not act there until a human signs in again."
    )
    assert keeper.decide(OWNER, SITE, "write").outcome == "need_login"


async def test_many_conversations_asking_at_once_make_one_sign_in(
    world: World, sites: LocalSites
) -> None:
    """Six grantees and the owner ask together after an expiry: one sign-in on the site,
    one ``renewed``, the rest ``renewed_by_another``."""
    keeper = world.keeper
    assert (await keeper.renew_login(OWNER, SITE)).renewed
    sites.expire_sessions(SITE)
    await keeper.report_signed_out(SITE, reported_by=OWNER, reason="server expiry")
    since = len(sites.requests(SITE))
    askers = [OWNER, *(f"grantee-{i}" for i in range(6))]
    results = await asyncio.gather(*(keeper.renew_login(c, SITE) for c in askers))
    assert sorted(r.outcome for r in results) == ["renewed"] + ["renewed_by_another"] * 6
    assert {r.owner for r in results} == {OWNER}
    assert posts(sites, "/login", since) == 1
    assert posts(sites, "/login/code", since) == 1
    attempts = await audit_entries(world, "login_renewal_attempt")
    assert len(attempts) == 2  # the first sign-in and the one renewal
    for c in askers:
        turn = await keeper.ensure(c)
        assert turn.renewed == (SITE,), c
    for c in askers[1:]:  # the grantees may read on the renewed login again
        assert keeper.decide(c, SITE, "read", assumes_login=True).outcome == "act", c


@pytest.mark.parametrize(
    "world",
    [
        EnvCredentials(
            environ={
                "SESSION_KEEPER_CRED_TOTP_EXAMPLE_USERNAME": "alice",
                "SESSION_KEEPER_CRED_TOTP_EXAMPLE_PASSWORD": "not the password",
                "SESSION_KEEPER_CRED_TOTP_EXAMPLE_TOTP": TOTP_SECRET,
            }
        )
    ],
    indirect=True,
)
async def test_a_refused_recipe_is_tried_a_bounded_number_of_times_then_left_to_a_person(
    world: World, sites: LocalSites
) -> None:
    """A wrong password: three attempts (the policy's bound), each audited, then
    ``needs_human``; nothing is recorded and the site acts for nobody."""
    keeper = world.keeper
    since = len(sites.requests(SITE))
    result = await keeper.renew_login(OWNER, SITE)
    assert (result.outcome, result.attempts, result.needs_human) == ("refused", 3, True)
    assert posts(sites, "/login", since) == 3
    assert keeper.logins() == ()
    failed = await audit_entries(world, "login_renewal_failed")
    assert [(f["attempt"], f["outcome"], f["asked_by"]) for f in failed] == [
        (1, "refused", OWNER),
        (2, "refused", OWNER),
        (3, "refused", OWNER),
    ]
    assert keeper.decide(OWNER, SITE, "write", assumes_login=True).outcome != "act"


#: A popup the model opens from its tab: same origin, it reads every value typed into its
#: opener's inputs (the opener's later documents on the origin included).
WATCH_THE_OPENER = """() => {
    const w = window.open('about:blank');
    w.eval(`window.seen = new Set(); setInterval(() => { try {
        for (const i of opener.document.querySelectorAll('input'))
            if (i.value) window.seen.add(i.value);
    } catch (e) {} }, 2)`);
}"""


@pytest.mark.chaos
async def test_a_renewal_types_the_password_where_no_page_of_the_model_reads_it(
    world: World, sites: LocalSites
) -> None:
    """The recipe types into a sign-in page of its own: a same-origin popup the model opened
    from the owner's tab, watching its opener's inputs, sees no secret; the owner's tab is
    moved to the signed-in page afterwards, and the sign-in page is none of its popups."""
    keeper = world.keeper
    tab = await keeper.tab(OWNER, f"http://{SITE}/login")
    await tab.evaluate(WATCH_THE_OPENER)
    result = await keeper.renew_login(OWNER, SITE)
    assert result.outcome == "renewed"
    (watcher,) = tab.popups()  # only the model's own popup: the sign-in page is not one
    seen = await watcher.evaluate("() => [...window.seen]")
    record("boundary", path="a renewal watched by the model's popup", attempts=1,
           arrived=int(TOTP_PASSWORD in seen))  # fmt: skip
    assert TOTP_PASSWORD not in seen and "alice" not in seen
    assert tab.url == f"http://{SITE}/account"
    assert await whoami(await keeper.unguarded_page(OWNER)) == "alice"


@pytest.mark.chaos
async def test_a_renewal_asked_by_a_conversation_with_no_grant_types_nothing(
    world: World, sites: LocalSites
) -> None:
    """With no login at the site yet, a conversation holding no grant cannot make itself
    the owner through a renewal: refused before anything is typed (the site's own log)."""
    keeper = world.keeper
    since = len(sites.requests(SITE))
    await keeper.ensure("stranger")
    with pytest.raises(RenewalRefused, match="holds no grant"):
        await keeper.renew_login("stranger", SITE)
    record("boundary", path="a renewal asked with no grant", attempts=1,
           arrived=posts(sites, "/login", since))  # fmt: skip
    assert posts(sites, "/login", since) == 0
    assert keeper.logins() == ()


async def test_an_unknown_page_ends_the_renewal_at_once_for_a_person(
    world: World, sites: LocalSites
) -> None:
    """A new-device check after the password is neither success nor failure: one attempt,
    ``unknown_page``, ``needs_human``."""
    keeper = world.keeper
    since = len(sites.requests(SITE))
    sites.challenge_new_device(True)
    try:
        result = await keeper.renew_login(OWNER, SITE)
    finally:
        sites.challenge_new_device(False)
    assert (result.outcome, result.attempts, result.needs_human) == ("unknown_page", 1, True)
    assert posts(sites, "/login", since) == 1
    assert keeper.logins() == ()


async def test_a_tampered_vault_row_is_a_typed_error_and_nothing_is_typed(
    world: World, sites: LocalSites
) -> None:
    """The sealed password altered in the store: SealBroken before the page is opened;
    the site gets no request at all."""
    doc_id = "session-keeper-credentials:default"
    doc = await world.store.load_keeper_state(doc_id)
    assert doc is not None
    sealed = doc["sites"][SITE]["password"]  # type: ignore[index]
    flipped = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    doc["sites"][SITE]["password"] = flipped  # type: ignore[index]
    await world.store.save_keeper_state(doc_id, doc)
    since = len(sites.requests(SITE))
    with pytest.raises(SealBroken):
        await world.keeper.renew_login(OWNER, SITE)
    assert sites.requests(SITE)[since:] == []
    assert world.keeper.logins() == ()
    failed = await audit_entries(world, "login_renewal_failed")
    assert [f["outcome"] for f in failed] == ["credentials"]


ITEMS_JS = """() => ({
    identity: document.querySelector('#page-id')?.textContent ?? null,
    rows: [...document.querySelectorAll('#items tr')].map(r => ({
        source_record_id: r.dataset.id,
        name: r.querySelector('.name').textContent,
    })),
    next: !!document.querySelector('#next'),
})"""


def page_no(cursor: str | None) -> int:
    return int((cursor or "page-1").removeprefix("page-"))


async def items_step(ctx: StepContext[Page]) -> Accepted:
    """Read one items page; anything else is a changed page."""
    seen = await ctx.page.evaluate(ITEMS_JS)
    if seen["identity"] is None:
        raise PageChanged("no items page here")
    nxt = f"page-{page_no(ctx.cursor) + 1}" if seen["next"] else None
    return ctx.accept(seen["rows"], nxt, page_identity=str(seen["identity"]))


async def test_a_relogin_job_is_renewed_twice_and_never_asks_a_person(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """A job whose action's policy is ``relogin``: the server signs it out after pages 1
    and 3; the loop renews from the vault (TOTP) before pausing, and the job finishes with
    every item once, no human pause, two renewals on the site."""
    conv = "job:items"
    async with SqliteStore(str(tmp_path / "k.db")) as store:
        keyring = Keyring.generate()
        vault = SealedCredentials(store, keyring)
        for field, value in (("username", "alice"), ("password", TOTP_PASSWORD)):
            await vault.set(SITE, field, value)
        await vault.set(SITE, "totp", TOTP_SECRET)
        keeper: SessionKeeper[Page] = SessionKeeper(
            playwright_backend(),
            grants=[Grant(conv, SITE, actions={"read"})],
            restart_policy={"read": "relogin"},
            login_settings=LoginSettings(
                fingerprint_key=bytes(range(32)),
                probes={SITE: whoami},
                recipes={SITE: RECIPE},
                credentials=vault,
                renewal=RenewalPolicy(backoff=timedelta(0)),
            ),
            durability=Durability(store=store, keyring=keyring, audit=AuditLog(store, keyring)),
        )
        committed = 0

        async def expire_after_pages_1_and_3() -> None:
            nonlocal committed
            committed += 1
            if committed in (1, 3):
                sites.expire_sessions(SITE)

        async with keeper:
            await keeper.ensure(conv)
            assert (await keeper.renew_login(conv, SITE)).outcome == "renewed"
            since = len(sites.requests(SITE))
            contract = JobContract(
                job_id="items",
                site=SITE,
                allowed_origins=(f"http://{SITE}",),
                required_fields=("name",),
                start_cursor="page-1",
                login_url=f"http://{SITE}/login*",
                extra={"conversation": conv},
            )
            loop = JobLoop(keeper, store, "w1")
            job_loop_testing(loop, fault_hooks={"after_commit": expire_after_pages_1_and_3})
            await loop.submit(contract)
            out = await loop.run(
                "items",
                items_step,
                target=lambda c: f"http://{SITE}/items?page={page_no(c)}",
                expect_identity=lambda c: f"items page {page_no(c)}",
            )
            assert (out.state, out.pages_committed) == ("done", TOTP_ITEM_PAGES)
            ids = [r.source_record_id for r in await store.results("items")]
            expected = [f"item-{n}-{i}" for n in range(1, TOTP_ITEM_PAGES + 1) for i in (1, 2)]
            assert sorted(ids) == expected
            assert await store.events(kind="human_pause") == []
            assert posts(sites, "/login/code", since) == 2
            await keeper.persist()
            renewed = [
                e
                for e in await store.events(kind="audit", limit=10_000)
                if e.data.get("type") == "login_renewed"
            ]
            assert len(renewed) == 3  # the first sign-in and two renewals


async def test_a_script_recipe_types_through_credentials_it_never_reads(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A ScriptRecipe signs in with ``credentials.fill`` on its guarded tab: renewed, and
    the script saw locators and field names only."""
    seen: list[str] = []

    async def sign_in(tab: ConversationTab, credentials: Credentials) -> SignInAnswer:
        await tab.goto(f"http://{SITE}/login")
        await credentials.fill(tab.get_by_label("Username"), "username")
        await credentials.fill(tab.get_by_label("Password"), "password")
        await tab.click("button[type=submit]")
        await tab.wait_for(selector="input[name=code]")
        await credentials.fill(tab.locator("input[name=code]"), "totp", totp=True)
        await tab.click("button[type=submit]")
        await tab.wait_for(selector="#account")
        seen.append(await tab.text())
        return "signed_in"

    environ = {
        "SESSION_KEEPER_CRED_TOTP_EXAMPLE_USERNAME": "alice",
        "SESSION_KEEPER_CRED_TOTP_EXAMPLE_PASSWORD": TOTP_PASSWORD,
        "SESSION_KEEPER_CRED_TOTP_EXAMPLE_TOTP": TOTP_SECRET,
    }
    recipe = ScriptRecipe(sign_in=sign_in, fields=("username", "password", "totp"))
    keeper: SessionKeeper[Page] = SessionKeeper(
        playwright_backend(),
        grants=[Grant(OWNER, SITE)],
        login_settings=LoginSettings(
            fingerprint_key=bytes(range(32)),
            probes={SITE: whoami},
            recipes={SITE: recipe},
            credentials=EnvCredentials(environ=environ),
        ),
    )
    async with keeper:
        await keeper.ensure(OWNER)
        result = await keeper.renew_login(OWNER, SITE)
        assert (result.outcome, result.account) == ("renewed", "alice")
        assert await whoami(await keeper.unguarded_page(OWNER)) == "alice"
    assert "alice" in seen[0] and TOTP_PASSWORD not in seen[0]


async def test_a_health_check_finds_a_server_side_expiry_and_renews_it(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """With ``health_every``, a sweep after the interval probes the login, finds the
    server signed it out, and renews it before any turn acts on it."""
    keeper: SessionKeeper[Page] = SessionKeeper(
        playwright_backend(),
        grants=[Grant(OWNER, SITE)],
        login_settings=LoginSettings(
            fingerprint_key=bytes(range(32)),
            probes={SITE: whoami},
            recipes={SITE: RECIPE},
            credentials=totp_credentials(),
            renewal=RenewalPolicy(health_every=timedelta(milliseconds=1)),
        ),
    )
    async with keeper:
        await keeper.ensure(OWNER)
        assert (await keeper.renew_login(OWNER, SITE)).renewed
        assert await keeper.check_logins() == ()  # first seen: due one interval on
        await asyncio.sleep(0.01)
        assert await keeper.check_logins() == ()  # due, and still signed in: nothing done
        sites.expire_sessions(SITE)
        since = len(sites.requests(SITE))
        await asyncio.sleep(0.01)
        await keeper.sweep()
        assert posts(sites, "/login/code", since) == 1
        assert await whoami(await keeper.unguarded_page(OWNER)) == "alice"
        turn = await keeper.ensure(OWNER)
        assert [str(x) for x in turn.lost_logins] == [f"login:{SITE}"]
        assert turn.renewed == (SITE,)


async def test_no_renewal_types_into_a_tab_a_person_has_taken_over(
    world: World, sites: LocalSites
) -> None:
    """While a person drives the owner's tab, renewal is refused and the site gets nothing."""
    world.keeper.begin_takeover(OWNER, expires_in=timedelta(minutes=5), by="ann")
    since = len(sites.requests(SITE))
    with pytest.raises(RenewalRefused, match="taken over"):
        await world.keeper.renew_login(OWNER, SITE)
    assert sites.requests(SITE)[since:] == []
    world.keeper.end_takeover(OWNER, by="ann")
    assert (await world.keeper.renew_login(OWNER, SITE)).outcome == "renewed"


def test_the_login_renewal_demo_ends_with_its_result_line() -> None:
    """``python demos/login_renewal.py``: two renewals, one person, no canary, every item once."""
    lines = run_demo("login_renewal.py", timeout=300).stdout.splitlines()
    assert lines[-1] == (
        "RESULT renewals=2 human_asks=1 canary_hits=0 lost=0 duplicated=0 validated=true"
    )


class _GraphState(BrowserState, total=False):
    pass


async def test_the_mcp_and_langgraph_faces_tell_a_renewal_once(
    world: World, sites: LocalSites, tmp_path: Path
) -> None:
    """A server-side expiry renewed by the recipe: the next MCP tool result says
    "Renewed" with the site (its structured facts too); after a second one, a LangGraph
    node's state carries the renewal in ``browser`` and ``browser_told``. Each once."""
    keeper = world.keeper
    assert (await keeper.renew_login(OWNER, SITE)).renewed
    await keeper.ensure(OWNER)  # the first sign-in is told here, not below
    for face in ("mcp", "langgraph"):
        sites.expire_sessions(SITE)
        await keeper.report_signed_out(SITE, reported_by=OWNER, reason="server expiry")
        assert (await keeper.renew_login(OWNER, SITE)).outcome == "renewed"
        if face == "mcp":
            async with Client(KeeperMCP(keeper).server) as client:
                told = await call(client, "browser_tabs", {"action": "list"}, conversation=OWNER)
                again = await call(client, "browser_tabs", {"action": "list"}, conversation=OWNER)
            assert f"Renewed: the keeper signed in again to {SITE}" in text(told), text(told)
            facts = restart(told)
            assert facts is not None and facts["renewed"] == [SITE]
            assert "Renewed" not in text(again) and restart(again) is None
        else:
            async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
                builder = StateGraph(_GraphState)
                builder.add_node("work", browser_node(keeper, sites=[SITE]))
                builder.add_edge(START, "work")
                builder.add_edge("work", END)
                graph = builder.compile(checkpointer=saver)
                thread: Any = {"configurable": {"thread_id": OWNER}}
                first = await graph.ainvoke({}, thread)
                later = await graph.ainvoke({}, thread)
            assert "__interrupt__" not in first
            assert TurnFacts.from_dict(first["browser"]).renewed == (SITE,)
            assert [TurnFacts.from_dict(f).renewed for f in first["browser_told"]] == [(SITE,)]
            assert TurnFacts.from_dict(later["browser"]).renewed == ()
            assert len(later["browser_told"]) == 1
