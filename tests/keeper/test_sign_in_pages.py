"""What a sign-in's pages say: an error status or a shown form is a failure, and a cookie
the login page set before the credentials (never set again) is the login page's."""

from __future__ import annotations

from session_keeper._model.sign_in import DocumentSeen, login_page_cookies, sign_in_failure

SITE = "php.example"


def seen(seq: int, method: str, status: int, *cookies: str, host: str = SITE) -> DocumentSeen:
    return DocumentSeen(
        seq=seq, method=method, status=status, host=host, set_cookies=frozenset(cookies)
    )


def test_the_last_response_of_the_site_decides_a_failure() -> None:
    """An error status last, or a password form shown, is a failure; other hosts do not count."""
    window = [seen(1, "GET", 200), seen(2, "POST", 401), seen(3, "GET", 200, host="docs.example")]
    assert sign_in_failure(window, SITE, password_form=False) == (
        f"the sign-in's last response from {SITE} was HTTP 401"
    )
    ok = [seen(1, "GET", 200), seen(2, "POST", 303), seen(3, "GET", 200)]
    assert sign_in_failure(ok, SITE, password_form=False) is None
    assert "sign-in form" in (sign_in_failure(ok, SITE, password_form=True) or "")
    assert sign_in_failure([], SITE, password_form=True) is None  # nothing seen: no judgement


def test_only_cookies_set_before_the_post_and_never_again_are_the_login_pages() -> None:
    """PHPSESSID set on the form page and kept is the login page's; one re-set at sign-in is not."""
    kept = [seen(1, "GET", 200, "PHPSESSID", "csrf"), seen(2, "POST", 303), seen(3, "GET", 200)]
    assert login_page_cookies(kept, SITE) == {"PHPSESSID", "csrf"}
    regenerated = [seen(1, "GET", 200, "PHPSESSID"), seen(2, "POST", 303, "PHPSESSID")]
    assert login_page_cookies(regenerated, SITE) == frozenset()
    no_post = [seen(1, "GET", 200, "PHPSESSID")]
    assert login_page_cookies(no_post, SITE) == frozenset()  # no credentials sent yet
