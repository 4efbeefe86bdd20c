"""record_login records a login only on evidence that it is one (issue 9, item 1).

The fake site here behaves like billing.example's /csrf/login: its sign-in page sets a
persistent CSRF cookie before anyone signs in, and a failed sign-in keeps it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

import session_keeper._keeper.logins.login_records as logins_module
from session_keeper import Grant, LoginSettings, SessionKeeper
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    LoginAccountMismatch,
    LoginNotObserved,
    LoginProbeFailed,
)
from session_keeper.testing import FakeBackend, FakeClock, FakePage

SITE = "billing.example"
LOGIN_PAGE = "http://billing.example/csrf/login"

World = tuple[SessionKeeper[FakePage], FakeBackend]


def keeper_on(
    backend: FakeBackend, *, login_settings: LoginSettings | None = None, **kw: Any
) -> SessionKeeper[FakePage]:
    """A keeper whose billing conversation may read and write billing.example (the
    caller's login settings, under a fixed fingerprint key)."""
    kw.setdefault("grants", [Grant("billing", SITE, actions={"read", "write"})])
    keyed = attrs.evolve(login_settings or LoginSettings(), fingerprint_key=bytes(32))
    return SessionKeeper(backend, clock=FakeClock(), login_settings=keyed, **kw)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    """A live keeper, nobody signed in."""
    backend = FakeBackend()
    async with keeper_on(backend) as keeper:
        await keeper.ensure("billing")
        yield keeper, backend


async def show_login_page(keeper: SessionKeeper[FakePage], backend: FakeBackend) -> None:
    """The agent opens the sign-in page; the site sets its CSRF cookie on it."""
    await backend.sign_in(SITE, name="billing_csrf", persistent=True)
    await keeper.tab("billing", LOGIN_PAGE)


async def test_cookie_present_before_sign_in_is_never_login_evidence(world: World) -> None:
    """A failed sign-in behind a CSRF cookie: LoginNotObserved, nothing recorded, no act."""
    keeper, backend = world
    await show_login_page(keeper, backend)
    # The human's sign-in fails: the jar keeps only the CSRF cookie.
    with pytest.raises(LoginNotObserved, match=SITE):
        await keeper.record_login("billing", SITE, account="alice")
    assert keeper.logins() == ()
    assert keeper.decide("billing", SITE, "write", assumes_login=True).outcome != "act"
    assert keeper.permits("billing", SITE, "read").outcome != "act"


async def test_a_navigation_does_not_wait_for_its_baseline_and_record_login_does(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tab(url) returns while its jar read is unanswered; record_login waits for that read,
    so the CSRF cookie the sign-in page set is still no evidence."""
    keeper, backend = world
    session = backend.current
    assert session is not None
    answer = asyncio.Event()
    read = session.cookies

    async def slow_read() -> Any:
        await answer.wait()
        return await read()

    monkeypatch.setattr(session, "cookies", slow_read)
    await backend.sign_in(SITE, name="billing_csrf", persistent=True)
    await asyncio.wait_for(keeper.tab("billing", LOGIN_PAGE), timeout=5)
    answer.set()
    with pytest.raises(LoginNotObserved, match=SITE):
        await keeper.record_login("billing", SITE, account="alice")
    assert keeper.logins() == ()


async def test_login_record_holds_only_the_cookies_the_sign_in_set(world: World) -> None:
    """After a real sign-in the record fingerprints the session cookie, not the CSRF cookie."""
    keeper, backend = world
    await show_login_page(keeper, backend)
    await backend.sign_in(SITE, name="billing_session")
    record = await keeper.record_login("billing", SITE, account="alice")
    assert [c.name for c in record.cookies] == ["billing_session"]
    assert keeper.decide("billing", SITE, "write", assumes_login=True).outcome == "act"


async def test_surviving_csrf_cookie_does_not_make_a_login_survive_a_clean_restart(
    world: World,
) -> None:
    """A failed try, then a sign-in; clean close + reopen keeps only CSRF: lost, not revalidate."""
    keeper, backend = world
    await show_login_page(keeper, backend)
    with pytest.raises(LoginNotObserved):  # the failed try leaves only the CSRF cookie
        await keeper.record_login("billing", SITE, account="alice")
    await backend.sign_in(SITE, name="billing_session")  # a session cookie
    await keeper.record_login("billing", SITE, account="alice")
    assert backend.current is not None
    await backend.current.close()
    turn = await keeper.ensure("billing")
    assert backend.current is not None
    assert [c.name for c in await backend.current.cookies()] == ["billing_csrf"]
    assert [str(x) for x in turn.lost_logins] == [f"login:{SITE}"]
    assert turn.revalidate == ()
    assert keeper.decide("billing", SITE, "write", assumes_login=True).outcome == "stop"


async def test_cookie_in_the_jar_when_the_browser_launched_is_never_evidence() -> None:
    """A persistent cookie the profile brought along does not become a login by recording it."""
    backend = FakeBackend()
    async with keeper_on(backend) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="billing_csrf", persistent=True)
        assert backend.current is not None
        await backend.current.close()
        await keeper.ensure("billing")  # relaunched: the CSRF cookie is in the new jar
        with pytest.raises(LoginNotObserved, match="started"):
            await keeper.record_login("billing", SITE)
        assert keeper.logins() == ()


async def test_begin_login_marks_where_the_sign_in_began(world: World) -> None:
    """After begin_login, a navigation between sign-in and record does not hide the evidence."""
    keeper, backend = world
    await show_login_page(keeper, backend)
    await keeper.begin_login("billing", SITE)
    await backend.sign_in(SITE, name="billing_session")
    await keeper.tab("billing", "http://billing.example/invoices")  # checks the result
    record = await keeper.record_login("billing", SITE)
    assert [c.name for c in record.cookies] == ["billing_session"]


async def test_begin_login_makes_cookies_already_there_no_evidence(world: World) -> None:
    """A cookie set before begin_login (and unchanged) is not evidence, whatever came after."""
    keeper, backend = world
    await backend.sign_in(SITE, name="billing_csrf", persistent=True)
    await keeper.begin_login("billing", SITE)
    with pytest.raises(LoginNotObserved, match="begin_login"):
        await keeper.record_login("billing", SITE)


async def test_evidence_that_vouched_for_a_login_never_vouches_for_another(world: World) -> None:
    """Signed out on the server, the same stale cookie cannot be recorded as a new login."""
    keeper, backend = world
    await show_login_page(keeper, backend)
    await backend.sign_in(SITE, name="billing_session")
    await keeper.record_login("billing", SITE)
    await keeper.report_signed_out(SITE, reported_by="billing")
    with pytest.raises(LoginNotObserved):
        await keeper.record_login("billing", SITE)
    assert keeper.logins() == ()
    await backend.sign_in(SITE, name="billing_session")  # a real new sign-in: new value
    assert (await keeper.record_login("billing", SITE)).site == SITE


async def test_configured_session_cookies_are_the_only_login_evidence() -> None:
    """With session_cookies named, another new cookie is not a login; the named one is."""
    backend = FakeBackend()
    async with keeper_on(
        backend, login_settings=LoginSettings(session_cookies={SITE: ["sid"]})
    ) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="consent", persistent=True)  # new, but not a session
        with pytest.raises(LoginNotObserved, match="sid"):
            await keeper.record_login("billing", SITE)
        assert keeper.logins() == ()
        await backend.sign_in(SITE, name="sid")
        record = await keeper.record_login("billing", SITE)
        assert [c.name for c in record.cookies] == ["sid"]


async def test_wrong_session_cookie_names_are_named_with_the_cookie_that_did_change() -> None:
    """session_cookies names a cookie the sign-in left alone: LoginNotObserved names the
    configured one and the one that did change, not "no cookie appeared"."""
    backend = FakeBackend()
    async with keeper_on(
        backend, login_settings=LoginSettings(session_cookies={SITE: ["sid"]})
    ) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="sid", persistent=True)
        await backend.aclose()  # a new browser: sid was there before the sign-in began
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="auth")
        with pytest.raises(LoginNotObserved) as raised:
            await keeper.record_login("billing", SITE)
        message = str(raised.value)
        assert "configured session cookies (sid)" in message and "did change: auth" in message
        assert keeper.logins() == ()


@pytest.mark.parametrize("bad", ["sid", 5, {SITE: "sid"}, {SITE: [1]}, {SITE: 5}])
async def test_session_cookies_must_name_cookies_per_site(bad: Any) -> None:
    """A malformed session_cookies= is refused with a typed error at construction."""
    with pytest.raises(InvalidArgumentType):
        keeper_on(FakeBackend(), login_settings=LoginSettings(session_cookies=bad))


def probe_answering(answer: str | None) -> Any:
    """A LoginProbe that answers ``answer`` and counts its calls."""

    async def probe(page: FakePage) -> str | None:
        probe.calls += 1  # type: ignore[attr-defined]
        return answer

    probe.calls = 0  # type: ignore[attr-defined]
    return probe


async def test_probe_that_sees_nobody_signed_in_records_no_login() -> None:
    """A new cookie, but the site's probe says nobody is signed in: LoginNotObserved."""
    backend = FakeBackend()
    probe = probe_answering(None)
    async with keeper_on(backend, login_settings=LoginSettings(probes={SITE: probe})) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="billing_session")
        with pytest.raises(LoginNotObserved, match="nobody"):
            await keeper.record_login("billing", SITE)
        assert probe.calls == 1 and keeper.logins() == ()
        assert keeper.decide("billing", SITE, "read", assumes_login=True).outcome != "act"


async def test_probe_seeing_another_account_refuses_the_record() -> None:
    """The probe sees mallory, the caller says alice: a typed error, nothing recorded."""
    backend = FakeBackend()
    async with keeper_on(
        backend, login_settings=LoginSettings(probes={SITE: probe_answering("mallory")})
    ) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="billing_session")
        with pytest.raises(LoginAccountMismatch) as caught:
            await keeper.record_login("billing", SITE, account="alice")
        assert "mallory" not in str(caught.value)
        assert keeper.logins() == ()


async def test_probe_identity_names_the_account_when_none_is_given() -> None:
    """record_login without account= takes the account the probe sees."""
    backend = FakeBackend()
    async with keeper_on(
        backend, login_settings=LoginSettings(probes={SITE: probe_answering("alice")})
    ) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="billing_session")
        assert (await keeper.record_login("billing", SITE)).account == "alice"


async def test_probe_vouches_for_a_login_whose_cookies_predate_the_record() -> None:
    """No cookie changed, but the probe sees the account: the site's cookies are recorded."""
    backend = FakeBackend()
    async with keeper_on(
        backend, login_settings=LoginSettings(probes={SITE: probe_answering("alice")})
    ) as keeper:
        await keeper.ensure("billing")
        await backend.sign_in(SITE, name="billing_session", persistent=True)
        assert backend.current is not None
        await backend.current.close()
        await keeper.ensure("billing")
        record = await keeper.record_login("billing", SITE, account="alice")
        assert [c.name for c in record.cookies] == ["billing_session"]


async def test_probe_that_raises_or_hangs_records_no_login(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A probe that fails or never answers proves nothing: LoginNotObserved, nothing recorded."""

    async def broken(page: FakePage) -> str | None:
        raise RuntimeError("the probe page did not load")

    async def hung(page: FakePage) -> str | None:
        await asyncio.Event().wait()
        return "alice"

    monkeypatch.setattr(logins_module, "PROBE_TIMEOUT_S", 0.05)
    for probe in (broken, hung):
        backend = FakeBackend()
        async with keeper_on(backend, login_settings=LoginSettings(probes={SITE: probe})) as keeper:
            await keeper.ensure("billing")
            await backend.sign_in(SITE, name="billing_session")
            with pytest.raises(LoginNotObserved, match="failed"):
                await keeper.record_login("billing", SITE, account="alice")
            assert keeper.logins() == ()
            assert backend.current is not None
            assert backend.current.pages("session-keeper:probe") == []  # its page is closed


async def test_probe_login_asks_the_sites_probe_and_says_when_it_cannot_tell() -> None:
    """probe_login: the identity, None for nobody, LoginProbeFailed, InvalidArgument without one."""

    async def broken(page: FakePage) -> str | None:
        raise RuntimeError("no answer")

    backend = FakeBackend()
    probes = {SITE: probe_answering("alice"), "sso.example": probe_answering(None)}
    async with keeper_on(
        backend, login_settings=LoginSettings(probes={**probes, "docs.example": broken})
    ) as keeper:
        await keeper.ensure("billing")
        assert keeper.has_login_probe(SITE) and not keeper.has_login_probe("todo.example")
        assert await keeper.probe_login(SITE) == "alice"
        assert await keeper.probe_login("sso.example") is None
        with pytest.raises(LoginProbeFailed):
            await keeper.probe_login("docs.example")
        with pytest.raises(InvalidArgument):
            await keeper.probe_login("todo.example")
