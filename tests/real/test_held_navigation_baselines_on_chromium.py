"""A handle's navigation reads the jar only when it can matter (issue 49): in a headless
browser only the keeper's handles drive, its jar read waits for the next act, so
navigating and looking read no jar, and what the site set before the sign-in is still no
evidence of it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from session_keeper import Grant, LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper.errors import LoginNotObserved
from session_keeper.seams import Cookie
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory

pytestmark = pytest.mark.chromium

BILLING = "billing.example"


def count_jar_reads(backend: PlaywrightBackend, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the live browser's jar reads (each a Storage.getCookies round trip)."""
    session = backend.current
    assert session is not None
    read = session.cookies
    counted = [0]

    async def counting() -> Sequence[Cookie]:
        counted[0] += 1
        return await read()

    monkeypatch.setattr(session, "cookies", counting)
    return counted


def billing_keeper(backend: Any) -> SessionKeeper[Any]:
    """A keeper where billing may read and write billing.example."""
    return SessionKeeper(
        backend,
        clock=FakeClock(),
        login_settings=LoginSettings(fingerprint_key=bytes(32)),
        grants=[Grant("billing", BILLING, actions={"read", "write"})],
    )


async def test_navigating_and_looking_with_no_sign_in_sends_no_jar_read(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Handle navigations, snapshots and titles with no sign-in send no Storage.getCookies;
    the first act sends one, before it, so the CSRF cookie the login page set is no
    evidence and the session cookie the sign-in set is."""
    backend = playwright_backend(tmp_path / "profile")
    async with billing_keeper(backend) as keeper:
        await keeper.ensure("billing")
        reads = count_jar_reads(backend, monkeypatch)
        tab = await keeper.tab("billing", sites.url(BILLING, "/"))
        await tab.snapshot()
        await tab.goto(sites.url(BILLING, "/csrf/login"))  # sets billing_csrf
        await tab.title()
        await tab.snapshot()
        assert reads[0] == 0

        await tab.fill("input[name=username]", "alice")
        assert reads[0] == 1  # the held read went out before the act
        await tab.fill("input[name=password]", "correct horse")
        await tab.click("button[type=submit]")
        await tab.wait_for(text="Invoices")
        assert reads[0] == 1  # one per navigation held, not one per act
        record = await keeper.record_login("billing", BILLING, account="alice")
        assert [c.name for c in record.cookies] == ["billing_session"]


async def test_a_held_baseline_still_makes_the_login_pages_cookie_no_evidence(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """No act after the navigations: record_login sends the held read itself, and the CSRF
    cookie the login page set before it is no login (the tab moved on: no form shown)."""
    backend = playwright_backend(tmp_path / "profile")
    async with billing_keeper(backend) as keeper:
        await keeper.ensure("billing")
        tab = await keeper.tab("billing", sites.url(BILLING, "/csrf/login"))
        await tab.goto(sites.url("docs.example", "/guide"))  # the agent moved on
        assert backend.current is not None
        names = {c.name for c in await backend.current.cookies() if c.applies_to(BILLING)}
        assert names == {"billing_csrf"}
        with pytest.raises(LoginNotObserved, match=r"no cookie of billing\.example"):
            await keeper.record_login("billing", BILLING, account="alice")
        assert keeper.logins() == ()


async def test_a_raw_page_handed_out_sends_the_held_jar_read_first(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Trusted code acts on a raw page where the keeper cannot see: unguarded_page sends the
    read a handle's navigation held before it returns the page."""
    backend = playwright_backend(tmp_path / "profile")
    async with billing_keeper(backend) as keeper:
        await keeper.ensure("billing")
        reads = count_jar_reads(backend, monkeypatch)
        await keeper.tab("billing", sites.url(BILLING, "/csrf/login"))
        assert reads[0] == 0
        await keeper.unguarded_page("billing")
        assert reads[0] == 1
        await keeper.unguarded_page("billing")
        assert reads[0] == 1  # nothing held any more
