"""Login truth on real Chromium: evidence, not presence; a server-side sign-out is a loss."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from demos.sites import CATALOGUE_PASSWORD, catalogue_ground_truth
from session_keeper import Grant, LoginSettings, SessionKeeper
from session_keeper.errors import LoginNotObserved, LoginStillMissing, PageChanged
from session_keeper.jobs import Accepted, JobContract, JobLoop, StepContext
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeClock, LocalSites, job_loop_testing

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = pytest.mark.chromium

KEY = bytes(range(32))
BILLING = "billing.example"
CATALOGUE = "catalogue.example"
CORRECT = "correct horse"


async def csrf_sign_in(keeper: SessionKeeper[Page], sites: LocalSites, password: str) -> None:
    """The human signs in through billing.example's CSRF-protected form."""
    page = await keeper.unguarded_page("billing", sites.url(BILLING, "/csrf/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", password)
    async with page.expect_navigation():
        await page.click("button[type=submit]")


def billing_keeper(backend: Any, **kw: Any) -> SessionKeeper[Page]:
    """A keeper where billing may read and write billing.example."""
    grants = [Grant("billing", BILLING, actions={"read", "write"})]
    return SessionKeeper(
        backend,
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=grants,
        **kw,
    )


async def test_failed_sign_in_behind_a_csrf_cookie_records_no_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The CSRF cookie the sign-in page set is no login: LoginNotObserved, and no act."""
    backend = playwright_backend()
    async with billing_keeper(backend) as keeper:
        await keeper.ensure("billing")
        await csrf_sign_in(keeper, sites, "wrong password")
        assert backend.current is not None
        names = {c.name for c in await backend.current.cookies() if c.applies_to(BILLING)}
        assert names == {"billing_csrf"}  # the site's cookie is there, the login is not
        with pytest.raises(LoginNotObserved, match=BILLING):
            await keeper.record_login("billing", BILLING, account="alice")
        assert keeper.logins() == ()
        assert keeper.decide("billing", BILLING, "write", assumes_login=True).outcome != "act"


async def test_a_sign_in_answered_with_an_error_status_records_nothing(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """begin_login() before the first visit, so the CSRF cookie appeared in the window; the
    wrong password's 401 says the sign-in failed: LoginNotObserved names the status."""
    backend = playwright_backend()
    async with billing_keeper(backend) as keeper:
        await keeper.ensure("billing")
        await keeper.begin_login("billing", BILLING)
        await csrf_sign_in(keeper, sites, "wrong password")
        with pytest.raises(LoginNotObserved, match="HTTP 401"):
            await keeper.record_login("billing", BILLING, account="alice")
        assert keeper.logins() == ()


async def test_after_a_clean_restart_a_surviving_csrf_cookie_is_no_surviving_login(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """The record holds only the session cookie; reopened with only CSRF left, the login is lost."""
    backend = playwright_backend()
    async with billing_keeper(backend) as keeper:
        await keeper.ensure("billing")
        await csrf_sign_in(keeper, sites, "wrong password")  # a failed try first
        await csrf_sign_in(keeper, sites, "correct horse")
        record = await keeper.record_login("billing", BILLING, account="alice")
        assert [c.name for c in record.cookies] == ["billing_session"]
        assert backend.current is not None
        await backend.current.close()  # clean: persistent cookies are flushed to the profile
        turn = await keeper.ensure("billing")
        assert backend.current is not None
        names = {c.name for c in await backend.current.cookies() if c.applies_to(BILLING)}
        assert names == {"billing_csrf"}
        assert [str(x) for x in turn.lost_logins] == [f"login:{BILLING}"]
        assert turn.revalidate == ()
        assert keeper.decide("billing", BILLING, "write", assumes_login=True).outcome == "stop"


#: One round trip reads what a step needs from a catalogue page.
OBSERVE_JS = """() => ({
    identity: document.querySelector('#page-id')?.textContent ?? null,
    rows: [...document.querySelectorAll('#items tr')].map(r => ({
        source_record_id: r.dataset.id,
        name: r.querySelector('.name').textContent,
    })),
    next: !!document.querySelector('#next'),
})"""


def page_no(cursor: str | None) -> int:
    return int((cursor or "page-1").removeprefix("page-"))


async def catalogue_step(ctx: StepContext[Page]) -> Accepted:
    """Read one catalogue page; anything else is a changed page."""
    seen = await ctx.page.evaluate(OBSERVE_JS)
    if seen["identity"] is None:
        raise PageChanged("no catalogue page here")
    nxt = f"page-{page_no(ctx.cursor) + 1}" if seen["next"] else None
    return ctx.accept(seen["rows"], nxt, page_identity=str(seen["identity"]))


async def test_server_side_expiry_mid_job_pauses_and_waits_for_a_new_sign_in(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """Expired on the server: the redirect to /login pauses the job, the keeper loses the
    login, resume waits for a recorded sign-in, then the job finishes with every record once."""
    conv = "job:catalogue-truth"
    clock = FakeClock()
    backend = playwright_backend()
    keeper = SessionKeeper(
        backend,
        clock=clock,
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=[Grant(conv, CATALOGUE, actions={"read"})],
    )

    async def human_signs_in() -> None:
        await keeper.ensure(conv)
        page = await keeper.unguarded_page(conv, sites.url(CATALOGUE, "/login"))
        await page.fill("input[name=password]", CATALOGUE_PASSWORD)
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        await keeper.record_login(conv, CATALOGUE, account="reader")

    def target(cursor: str | None) -> str:
        return sites.url(CATALOGUE, f"/shop/items?page={page_no(cursor)}")

    def identity(cursor: str | None) -> str:
        return f"catalogue page {page_no(cursor)}"

    committed = 0

    async def expire_after_two_pages() -> None:
        nonlocal committed
        committed += 1
        if committed == 2:
            sites.expire_sessions(CATALOGUE)

    async with SqliteStore(tmp_path / "jobs.db", clock=clock) as store, keeper:
        await human_signs_in()
        contract = JobContract(
            job_id="catalogue-truth",
            site=CATALOGUE,
            allowed_origins=(f"http://{CATALOGUE}",),
            required_fields=("name",),
            start_cursor="page-1",
            login_url=f"http://{CATALOGUE}/login*",
            extra={"conversation": conv},
        )
        loop = JobLoop(keeper, store, "w1")
        job_loop_testing(loop, fault_hooks={"after_commit": expire_after_two_pages})
        await loop.submit(contract)
        out = await loop.run(
            "catalogue-truth", catalogue_step, target=target, expect_identity=identity
        )
        assert out.state == "awaiting_human" and out.pages_committed == 2
        assert [(x.name, x.cause) for x in keeper.lost_logins()] == [(CATALOGUE, "signed_out")]
        assert keeper.decide(conv, CATALOGUE, "read", assumes_login=True).outcome != "act"
        with pytest.raises(LoginStillMissing):
            await loop.resume("catalogue-truth", decided_by="ann")
        await human_signs_in()
        assert (await loop.resume("catalogue-truth", decided_by="ann")).state == "ready"
        done = await loop.run(
            "catalogue-truth", catalogue_step, target=target, expect_identity=identity
        )
        assert done.state == "done"
        ids = [r.source_record_id for r in await store.results("catalogue-truth")]
        assert sorted(ids) == sorted(catalogue_ground_truth())


PHP = "php.example"


async def php_sign_in(keeper: SessionKeeper[Page], sites: LocalSites, password: str) -> Page:
    """begin_login(), then the human opens php.example's login page and signs in."""
    await keeper.ensure("php")
    await keeper.begin_login("php", PHP)  # before the first visit: the jar has nothing of it
    page = await keeper.unguarded_page("php", sites.url(PHP, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", password)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    return page


async def whoami(page: Page) -> str | None:
    """php.example's own word on who is signed in (a LoginProbe)."""
    response = await page.goto(f"http://{PHP}/whoami")
    assert response is not None
    account: str | None = (await response.json())["account"]
    return account


async def test_a_wrong_password_answered_200_with_the_form_records_nothing(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """php.example sets its session cookie on the login page and answers a wrong password
    with 200 and the form: that cookie is no evidence, the form says the sign-in failed."""
    grants = [Grant("php", PHP, actions={"read", "write"})]
    keeper = SessionKeeper(
        playwright_backend(),
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=KEY),
        grants=grants,
    )
    mark = len(sites.served(PHP))  # the log is the session's: other tests sign in too
    async with keeper:
        await php_sign_in(keeper, sites, "wrong password")
        with pytest.raises(LoginNotObserved, match="sign-in form"):
            await keeper.record_login("php", PHP, account="alice")
        assert keeper.logins() == ()
        assert keeper.decide("php", PHP, "write", assumes_login=True).outcome != "act"
        assert {a for _, a in sites.served(PHP)[mark:]} == {None}  # the site's word: nobody


async def test_a_session_cookie_the_login_page_set_and_kept_is_no_evidence_without_a_probe(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """A correct sign-in that only binds the login page's PHPSESSID: no evidence in the jar
    (LoginNotObserved says the login page set it); with a LoginProbe the site vouches."""
    grants = [Grant("php", PHP, actions={"read", "write"})]
    backend = playwright_backend()
    async with SessionKeeper(
        backend, clock=FakeClock(), login_settings=LoginSettings(fingerprint_key=KEY), grants=grants
    ) as k:
        await php_sign_in(k, sites, CORRECT)
        with pytest.raises(LoginNotObserved, match="set by its login page"):
            await k.record_login("php", PHP, account="alice")
        assert k.logins() == ()
    probed = SessionKeeper(
        playwright_backend(),
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=KEY, probes={PHP: whoami}),
        grants=grants,
    )
    async with probed:
        await php_sign_in(probed, sites, CORRECT)
        record = await probed.record_login("php", PHP)
        assert (record.account, [c.name for c in record.cookies]) == ("alice", ["PHPSESSID"])


REISSUE = "reissue.example"


async def reissue_whoami(page: Page) -> str | None:
    """reissue.example's own word on who is signed in (a LoginProbe)."""
    response = await page.goto(f"http://{REISSUE}/whoami")
    assert response is not None
    account: str | None = (await response.json())["account"]
    return account


async def test_a_login_cookie_reissued_each_browser_session_survives_when_the_probe_says_so(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """reissue.example re-encrypts its login cookie in every new browser session: after two
    clean restarts the jar's value is new, the probe sees alice, and the login survives."""
    grants = [Grant("mail", REISSUE, actions={"read", "write"})]
    profile = tmp_path / "profile"
    backend = playwright_backend(profile)
    keeper = SessionKeeper(
        backend,
        clock=FakeClock(),
        login_settings=LoginSettings(
            fingerprint_key=KEY,
            probes={REISSUE: reissue_whoami},
            session_cookies={REISSUE: ["remember"]},
        ),
        grants=grants,
    )
    mark = len(sites.served(REISSUE))  # the log is the session's: other tests sign in too
    async with keeper:
        await keeper.ensure("mail")
        page = await keeper.unguarded_page("mail", sites.url(REISSUE, "/login"))
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", CORRECT)
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        await keeper.record_login("mail", REISSUE, account="alice")
        for _ in range(2):
            assert backend.current is not None
            await backend.current.close()  # clean: the persistent login cookie is kept
            turn = await keeper.ensure("mail")
            assert turn.restarted and turn.lost_logins == ()
        assert [r.site for r in keeper.logins()] == [REISSUE]
        assert keeper.lost_logins() == ()
        assert keeper.decide("mail", REISSUE, "write", assumes_login=True).outcome == "act"
    # The site's word: every /whoami after the sign-in was served as alice.
    assert {a for p, a in sites.served(REISSUE)[mark:] if p == "/whoami"} == {"alice"}
