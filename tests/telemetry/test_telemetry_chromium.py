"""OpenTelemetry on real Chromium: a SIGKILL's restart and a Guard refusal, with canaries."""

from __future__ import annotations

import logging
import secrets

import pytest
from playwright.async_api import Page

from session_keeper import Grant, Guard, LoginSettings, SessionKeeper, Telemetry
from session_keeper.errors import NavigationBlocked
from session_keeper.testing import FakeClock, LocalSites

from ..conftest import BackendFactory
from .conftest import Otel, attributes

pytestmark = pytest.mark.chromium

KEY = bytes(range(32))


def keeper_on(backend: object, telemetry: Telemetry) -> SessionKeeper[Page]:
    """A keeper where billing owns billing.example (research holds no grant there)."""
    return SessionKeeper(
        backend,  # type: ignore[arg-type]
        clock=FakeClock(),
        grants=[Grant("billing", "billing.example")],
        login_settings=LoginSettings(fingerprint_key=KEY),
        telemetry=telemetry,
    )


async def sign_in(keeper: SessionKeeper[Page], sites: LocalSites, password: str) -> str:
    """billing signs in through its tab, typing ``password``; returns the session cookie."""
    await keeper.ensure("billing")
    tab = await keeper.tab("billing", sites.url("billing.example", "/login"))
    await tab.fill("input[name=username]", "alice")
    await tab.fill("input[name=password]", password)
    await tab.click("button[type=submit]")
    await tab.wait_for(text="Invoices")
    await keeper.record_login("billing", "billing.example", account="alice")
    session = keeper.backend.current  # type: ignore[attr-defined]
    cookie = next(c.value for c in await session.cookies() if c.name == "billing_session")
    assert isinstance(cookie, str)
    return cookie


async def test_a_sigkilled_browser_is_a_restarted_turn_span_and_a_restart_point(
    playwright_backend: BackendFactory, otel: Otel
) -> None:
    """SIGKILL, then ensure(): the turn span says restarted with the login and tab lost;
    the tab's fill/click/goto are spans naming host and path (never the query or what
    was typed); restarts and losses are counted; no cookie or password canary anywhere."""
    password = "canary-pw-" + secrets.token_hex(6)
    token = "canary-token-" + secrets.token_hex(6)
    with LocalSites(billing_accounts={"alice": password}) as sites:
        backend = playwright_backend(host_resolver_rules=sites.host_resolver_rules)
        async with keeper_on(backend, otel.telemetry) as keeper:
            cookie = await sign_in(keeper, sites, password)
            tab = await keeper.tab("billing")
            await tab.goto(sites.url("billing.example", "/invoices") + "?magic=" + token)
            assert backend.current is not None
            await backend.current.kill()
            facts = await keeper.ensure("billing")
    assert facts.restarted and facts.generation == 2
    turn = otel.spans("session_keeper.ensure")[-1]
    assert attributes(turn)["session_keeper.restarted"] is True
    assert attributes(turn)["session_keeper.generation"] == 2
    assert set(attributes(turn)["session_keeper.lost.kinds"]) == {"login", "tab"}
    assert list(attributes(turn)["session_keeper.lost.logins"]) == ["billing.example"]
    gotos = [attributes(s) for s in otel.spans("session_keeper.tab.goto")]
    assert {"server.address": "billing.example", "url.path": "/invoices"}.items() <= gotos[
        -1
    ].items()
    assert otel.spans("session_keeper.tab.fill") and otel.spans("session_keeper.tab.click")
    assert otel.points("session_keeper.browser.restarts") == [({}, 1)]
    kinds = {a["session_keeper.loss.kind"] for a, _ in otel.points("session_keeper.losses")}
    assert kinds == {"login", "tab"}
    assert otel.canaries(cookie=cookie, password=password, token=token) == []


async def test_a_guard_refusal_is_an_event_on_the_refused_operation_and_a_span_of_its_own(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    otel: Otel,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """research, holding no grant, navigates to the signed-in billing site: the goto span
    fails with error.type NavigationBlocked and carries the refusal event; the refusal's
    own span names rule, host and path (no query); refusals count by rule and admissions
    are counted; its log record carries rule and conversation as structured fields; no
    cookie or token canary anywhere."""
    caplog.set_level(logging.INFO, logger="session_keeper")
    token = "canary-token-" + secrets.token_hex(6)
    backend = playwright_backend()
    keeper = keeper_on(backend, otel.telemetry)
    Guard(keeper)
    async with keeper:
        cookie = await sign_in(keeper, sites, "correct horse")
        await keeper.ensure("research")
        tab = await keeper.tab("research", sites.url("docs.example", "/"))
        with pytest.raises(NavigationBlocked) as caught:
            await tab.goto(sites.url("billing.example", "/invoices") + "?token=" + token)
    rule = caught.value.block.rule
    refused = otel.spans("session_keeper.tab.goto")[-1]
    assert attributes(refused)["error.type"] == "NavigationBlocked"
    assert attributes(refused)["session_keeper.conversation"] == "research"
    (event,) = [e for e in refused.events if e.name == "session_keeper.guard.refusal"]
    assert dict(event.attributes or {})["session_keeper.rule"] == rule
    own = [attributes(s) for s in otel.spans("session_keeper.guard.refusal")]
    mine = [a for a in own if a.get("session_keeper.conversation") == "research"]
    assert mine and mine[0]["server.address"] == "billing.example"
    assert mine[0]["url.path"] == "/invoices" and mine[0]["session_keeper.rule"] == rule
    refusals = {
        a["session_keeper.rule"]: v for a, v in otel.points("session_keeper.guard.refusals")
    }
    assert refusals[rule] >= 1
    assert sum(v for _, v in otel.points("session_keeper.guard.admissions")) >= 1
    assert otel.canaries(cookie=cookie, token=token) == []
    (logged,) = [
        r.__dict__
        for r in caplog.records
        if r.getMessage().startswith("guard blocked")
        and r.__dict__.get("session_keeper.conversation") == "research"
    ]
    assert logged["session_keeper.rule"] == rule
    assert logged.get("session_keeper.site") == caught.value.block.site
