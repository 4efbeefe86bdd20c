"""The small HTML helpers every demo site uses."""

from __future__ import annotations

import html

from session_keeper.testing import SiteResponse

JSON = (("Content-Type", "application/json"),)


def page(title: str, body: str) -> str:
    """A whole HTML page around ``body``."""
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head><body>{body}</body></html>"
    )


def html_response(
    title: str, body: str, *, status: int = 200, headers: tuple[tuple[str, str], ...] = ()
) -> SiteResponse:
    """An HTML page as a response."""
    return SiteResponse(status=status, headers=headers, body=page(title, body))


def not_found() -> SiteResponse:
    """The 404 every site answers for a path it does not have."""
    return html_response("Not found", "<h1>Not found</h1>", status=404)
