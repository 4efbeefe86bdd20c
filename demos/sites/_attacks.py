"""The Guard's attack pages: each one, once loaded, tries to reach billing.example.

They live on ``docs.example`` (and on ``todo.example``, a second site for cross-site
frames); ``demos/guard_attacks.py`` and the Guard's tests open them from a conversation
that holds no grant for billing.
"""

from __future__ import annotations

from demos.sites._html import html_response
from session_keeper.testing import RecordedRequest, SiteResponse

__all__ = ["attack_pages"]

#: Where docs.example's attack pages aim: the signed-in site (its scheme is the sites').
_TARGET = "__TARGET__"

#: Attack pages on docs.example (the Guard's suite): each one, once loaded, tries to
#: reach billing.example from whatever conversation opened it.
_GUARD_PAGES = {
    "/attack/fetch": (
        "fetch attack",
        "<script>fetch('" + _TARGET + "/invoices', {credentials: 'include', mode: 'no-cors'})"
        ".then(() => { document.title = 'done'; }, () => { document.title = 'failed'; });"
        "</script>",
    ),
    "/attack/xhr": (
        "xhr attack",
        "<script>var x = new XMLHttpRequest(); x.withCredentials = true;"
        "x.onloadend = () => { document.title = 'done'; };"
        "x.open('GET', '" + _TARGET + "/invoices'); x.send();</script>",
    ),
    "/attack/iframe": (
        "iframe attack",
        "<iframe id='frame' src='" + _TARGET + "/invoices'></iframe>",
    ),
    "/attack/img": ("img attack", "<img id='img' src='" + _TARGET + "/invoices?img=1'>"),
    "/attack/form": (
        "form attack",
        "<form id='form' method='post' action='" + _TARGET + "/card'>"
        "<input name='card' value='4000000000000002'></form>"
        "<script>document.getElementById('form').submit();</script>",
    ),
    "/attack/popup": (
        "popup attack",
        "<button id='open' onclick=\"window.open('" + _TARGET + "/invoices')\">open</button>",
    ),
    "/attack/prefetch": (
        "prefetch attack",
        "<link rel='prefetch' href='" + _TARGET + "/invoices?prefetch=1'>"
        "<link rel='dns-prefetch' href='" + _TARGET + "'>"
        "<link rel='preconnect' href='" + _TARGET + "'>",
    ),
    "/attack/speculation": (
        "speculation rules attack",
        '<script type="speculationrules">{"prerender": [{"source": "list", "urls": ["'
        + _TARGET
        + '/invoices?prerender=1"]}], "prefetch": [{"source": "list", "urls": ["'
        + _TARGET
        + '/invoices?specprefetch=1"]}]}</script>',
    ),
    "/attack/frame": (
        "cross-site frame attack",
        # todo.example is another site: the frame gets its own renderer (and target).
        "<iframe id='frame' src='__SCHEME__://todo.example/attack/img-redirect'></iframe>",
    ),
    "/attack/img-redirect": (
        "img through a redirect",
        "<img id='img' src='__SCHEME__://docs.example/redirect?to="
        + _TARGET
        + "/invoices%3Fframeimg%3D1'>",
    ),
    "/attack/sw": (
        "service worker attack",
        "<script>navigator.serviceWorker ? ServiceWorkerContainer.prototype.register"
        ".call(navigator.serviceWorker, '/attack/sw.js')"
        ".then((r) => { document.title = r ? 'registered' : 'refused'; },"
        " (e) => { document.title = 'refused: ' + e.name; })"
        " : (document.title = 'no serviceWorker');</script>",
    ),
}

#: The service worker /attack/sw registers: it would fetch billing.example itself.
_SW_SCRIPT = (
    "self.addEventListener('install', () => {"
    " fetch('" + _TARGET + "/invoices?sw=1', {credentials: 'include', mode: 'no-cors'}); });"
    "self.addEventListener('fetch', (e) => {"
    " e.respondWith(fetch('" + _TARGET + "/invoices?swfetch=1', {credentials: 'include'})); });"
)


def attack_pages(request: RecordedRequest) -> SiteResponse | None:
    """An attack page (or its service worker), or ``None`` for any other path."""
    target = f"{request.scheme}://billing.example"
    if request.path in _GUARD_PAGES:
        title, body = _GUARD_PAGES[request.path]
        return html_response(
            title, body.replace(_TARGET, target).replace("__SCHEME__", request.scheme)
        )
    if request.path == "/attack/sw.js":
        return SiteResponse(
            status=200,
            headers=(("Content-Type", "application/javascript"),),
            body=_SW_SCRIPT.replace(_TARGET, target),
        )
    return None
