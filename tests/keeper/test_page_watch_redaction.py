"""What a page's watch shows of a request: never a credential (no browser needed)."""

from __future__ import annotations

import pytest

from session_keeper._keeper.tabs.page_watch import REDACTED, redact_headers, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://a.example/p?token=s3cret&x=1#frag", f"https://a.example/p?token={REDACTED}&x={REDACTED}"),
        ("https://user:pw@a.example:8443/p", "https://a.example:8443/p"),
        ("http://a.example/", "http://a.example/"),
        ("data:text/plain;base64,c2VjcmV0", f"data:text/plain;base64,{REDACTED}"),
    ],
)  # fmt: skip
def test_a_requests_url_keeps_no_query_value_fragment_or_user_info(url: str, shown: str) -> None:
    """Query values, fragments, user-info and data: payloads are cut; names stay."""
    assert redact_url(url) == shown


def test_credential_headers_are_redacted_and_url_headers_lose_their_query() -> None:
    """Cookie, Set-Cookie, Authorization and token-like headers read as redacted; a
    Referer keeps its path but not its query values; other headers are kept."""
    shown = dict(
        redact_headers(
            {
                "Cookie": "sid=abc",
                "set-cookie": "sid=abc; Path=/",
                "Authorization": "Bearer abc",
                "X-CSRF-Token": "abc",
                "x-api-key": "abc",
                "Referer": "https://a.example/search?q=abc",
                "Accept": "text/html",
            }
        )
    )
    assert shown == {
        "cookie": REDACTED,
        "set-cookie": REDACTED,
        "authorization": REDACTED,
        "x-csrf-token": REDACTED,
        "x-api-key": REDACTED,
        "referer": f"https://a.example/search?q={REDACTED}",
        "accept": "text/html",
    }
