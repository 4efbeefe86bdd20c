"""Which cookies a request carries: the keeper's rule against RFC 6265bis and real Chromium."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from session_keeper._browser.playwright import PlaywrightBackend
from session_keeper.seams import Cookie
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend


def jar_cookie(name: str, domain: str, path: str = "/", **kw: object) -> Cookie:
    return Cookie(name=name, value="v", domain=domain, path=path, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cookie", "url", "top", "sent"),
    [
        # host-only: that host only
        (jar_cookie("h", "docs.example"), "http://docs.example/", None, True),
        (jar_cookie("h", "docs.example"), "http://app.docs.example/", None, False),
        (jar_cookie("h", "docs.example"), "http://example/", None, False),
        # domain cookie: the host and its subdomains, never a parent or a look-alike
        (jar_cookie("d", ".docs.example"), "http://docs.example/", None, True),
        (jar_cookie("d", ".docs.example"), "http://app.docs.example/x", None, True),
        (jar_cookie("d", ".docs.example"), "http://example/", None, False),
        (jar_cookie("d", ".docs.example"), "http://evildocs.example/", None, False),
        # path-match: prefix at a "/" boundary
        (jar_cookie("p", "docs.example", "/private"), "http://docs.example/private", None, True),
        (jar_cookie("p", "docs.example", "/private"), "http://docs.example/private/a", None, True),
        (jar_cookie("p", "docs.example", "/private"), "http://docs.example/privateer", None, False),
        (jar_cookie("p", "docs.example", "/private"), "http://docs.example/", None, False),
        (jar_cookie("p", "docs.example", "/private/"), "http://docs.example/private/a", None, True),
        # Secure: https only, except a local host (Chromium's secure context)
        (jar_cookie("s", "docs.example", secure=True), "https://docs.example/", None, True),
        (jar_cookie("s", "docs.example", secure=True), "http://docs.example/", None, False),
        (jar_cookie("s", "localhost", secure=True), "http://localhost/", None, True),
        # partitioned (CHIPS): only under the top-level site it was set in
        (
            jar_cookie("c", "docs.example", secure=True, partition_key="https://todo.example"),
            "https://docs.example/",
            "https://todo.example/page",
            True,
        ),
        (
            jar_cookie("c", "docs.example", secure=True, partition_key="https://todo.example"),
            "https://docs.example/",
            "https://sso.example/",
            False,
        ),
        (
            jar_cookie("c", "docs.example", secure=True, partition_key="https://todo.example"),
            "https://docs.example/",
            None,
            False,
        ),
    ],
)
def test_a_request_carries_exactly_the_cookies_the_browser_rules_send(
    cookie: Cookie, url: str, top: str | None, sent: bool
) -> None:
    """Cookie.sent_with follows domain-match (host-only exact), path-match, Secure and CHIPS."""
    assert cookie.sent_with(url, top_level_site=top) is sent


def test_a_host_only_cookie_is_not_a_subdomains_login() -> None:
    """A host-only cookie applies to its host only; a domain cookie to the host and subdomains."""
    assert jar_cookie("h", "billing.example").applies_to("billing.example")
    assert not jar_cookie("h", "billing.example").applies_to("pay.billing.example")
    assert jar_cookie("d", ".billing.example").applies_to("pay.billing.example")
    assert jar_cookie("h", "billing.example").host_only
    assert not jar_cookie("d", ".billing.example").host_only


SCOPED = [
    jar_cookie("hostonly", "docs.example"),
    jar_cookie("domainwide", ".docs.example"),
    jar_cookie("pathed", "docs.example", "/private"),
    jar_cookie("secureonly", "docs.example", secure=True),
]
URLS = ["/", "/private", "/privateer"]


async def visit_and_compare(backend: PlaywrightBackend, sites: LocalSites) -> int:
    session = await backend.launch()
    await session.add_cookies(SCOPED)
    page = await session.open_page("scoping")
    compared = 0
    for host in ("docs.example", "app.docs.example"):
        for path in URLS:
            url = sites.url(host, path)
            sites.clear_requests()
            await page.goto(url)
            got = [r for r in sites.requests(host) if r.path == path]
            assert got, url
            expected = {c.name for c in SCOPED if c.sent_with(url)}
            for request in got:
                assert set(request.cookie_names) == expected, url
            compared += 1
    await session.close()
    return compared


@pytest.mark.chromium
async def test_chromium_sends_over_http_exactly_the_cookies_sent_with_predicts(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """Over http: host-only vs domain cookie on a subdomain, path scope, no Secure cookie."""
    assert await visit_and_compare(playwright_backend(), sites) == 6


@pytest.mark.chromium
async def test_chromium_sends_over_https_exactly_the_cookies_sent_with_predicts(
    secure_backend: Callable[..., PlaywrightBackend], secure_sites: LocalSites
) -> None:
    """Over https: the same, and the Secure cookie comes along."""
    assert await visit_and_compare(secure_backend(), secure_sites) == 6


@pytest.mark.chromium
async def test_the_guard_protects_the_hosts_a_host_only_login_reaches_and_no_others(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """billing's host-only login: its subdomain (which never receives it) is not guarded."""
    from session_keeper import Guard

    from .conftest import billing_keeper, sign_in_billing

    keeper = billing_keeper(playwright_backend())
    guard = Guard(keeper)
    async with keeper:
        await sign_in_billing(keeper, sites)
        (record,) = keeper.logins()
        assert [c.host_only for c in record.cookies] == [True]
        await keeper.ensure("research")
        tab = await keeper.tab("research", sites.url("docs.example", "/"))
        fetch = "u => fetch(u, {mode: 'no-cors'}).then(() => 'ok', e => String(e))"
        assert await tab.evaluate(fetch, sites.url("api.billing.example", "/?scoped=1")) == "ok"
        await tab.evaluate(fetch, sites.url("billing.example", "/?scoped=2"))
        sub = [r for r in sites.requests("api.billing.example") if r.query == "scoped=1"]
        # (The unknown host answers 421, which Chromium retries once: count is 1 or 2.)
        assert sub and all(r.cookie("billing_session") is None for r in sub)
        assert not any(b.origin.endswith("api.billing.example") for b in guard.blocks)
        assert any(b.origin == "http://billing.example" and b.path == "/" for b in guard.blocks)
        assert not [r for r in sites.requests("billing.example") if r.query == "scoped=2"]
