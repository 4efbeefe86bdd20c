"""SsoSites, driven with a plain HTTP client: the single sign-on servers start, answer, and
log every request with the account they served it as (here always nobody)."""

from __future__ import annotations

import json

import pytest

from demos.sites.sso import HOSTS, SsoSites, SsoSitesError, node_too_old


def test_every_host_answers_and_is_logged_as_served_to_nobody(sso_sites: SsoSites) -> None:
    """Each host answers over HTTPS on one port; the log has one line per request, with the
    server's name and no account."""
    mark = sso_sites.mark()
    answers = {host: sso_sites.request(host, "/")[0] for host in HOSTS}
    assert answers == dict.fromkeys(HOSTS, 200)
    served = sso_sites.served(since=mark)
    assert [(e.server, e.host, e.path, e.status, e.account) for e in served] == [
        (host.split(".")[0], host, "/", 200, None) for host in HOSTS
    ]


def test_a_relying_party_sends_a_sign_in_to_the_idp_with_pkce(sso_sites: SsoSites) -> None:
    """app's /login sets its transaction cookie and redirects to the IdP with an S256 code
    challenge and a state; /api/me serves nobody without a session or with a made-up token."""
    mark = sso_sites.mark()
    status, _ = sso_sites.request("app.example", "/login")
    assert status == 302
    status, body = sso_sites.request(
        "app.example", "/api/me", headers={"Authorization": "Bearer made-up"}
    )
    assert (status, json.loads(body)) == (200, {"account": None})
    login = sso_sites.served("app", since=mark)[0]
    assert (login.path, login.event, login.account) == ("/login", "login-redirect", None)


def test_a_server_side_sign_out_of_an_account_without_sessions_ends_none(
    sso_sites: SsoSites,
) -> None:
    """sign_out_everywhere answers how many IdP sessions it ended (0 here) and is logged."""
    mark = sso_sites.mark()
    assert sso_sites.sign_out_everywhere("bob") == 0
    assert [e.event for e in sso_sites.served("idp", since=mark)] == ["sign-out-everywhere"]


def test_a_host_the_sites_do_not_serve_is_refused_before_any_request(sso_sites: SsoSites) -> None:
    """url() and request() name the hosts they serve instead of guessing."""
    with pytest.raises(ValueError, match=r"idp\.example"):
        sso_sites.url("billing.example")
    with pytest.raises(ValueError, match=r"idp\.example"):
        sso_sites.request("billing.example", "/")
    assert sso_sites.url("app.example", "api/me") == "https://app.example/api/me"


def test_a_stopped_site_says_so() -> None:
    """Addresses and the log of sites that are not running raise SsoSitesError."""
    sites = SsoSites()
    with pytest.raises(SsoSitesError):
        _ = sites.port
    with pytest.raises(SsoSitesError):
        sites.served()
    sites.stop()  # a no-op


@pytest.mark.parametrize(
    ("version", "old"),
    [("v20.20.2", False), ("v22.1.0", False), ("v20.18.9", True), ("v18.19.0", True), ("", True)],
)
def test_node_older_than_20_19_is_refused(version: str, old: bool) -> None:
    """The version check reads `node --version` and refuses what the site cannot run on."""
    assert node_too_old(version) is old
