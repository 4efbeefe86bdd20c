"""The Guard's attack suite on real Chromium: does a login leak to a conversation without a grant?

The ``billing`` conversation (which holds a read/write grant) signs in to
``billing.example``. Then ``research`` (no grant) tries to reach billing every way a
page can: navigation, fetch, XHR, iframe, popup, form POST, ``<img>``, a redirect
from an allowed site, a service worker, ``<link rel=prefetch>``. Then ``research``
gets a read-only grant: GET passes, POST does not; a one-time write borrow lets
exactly one POST through. Then an origin allowlist. Every
count is taken **on the server side**, from LocalSites' request log: requests that
arrived at all, and requests that carried the ``billing_session`` cookie.

Finally it plants canaries (the password typed into the sign-in form, the live
login cookie, a planted cookie) and searches everything the keeper wrote — the
SQLite file, its WAL, the event log, captured log records, the messages of the
errors it raised — for them.

It runs twice: against a ``SameSite=Lax`` login over HTTP, and against a
``SameSite=None; Secure`` login over HTTPS (sent with cross-site requests too).

Usage: ``python demos/guard_attacks.py``. Prints one row per attempt and, last,
``RESULT attempts=N ... leaked_requests=0 canary_hits=0``. Exits 1 on any leak.
Progress goes to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import secrets
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import attrs
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

# Run as a script (python demos/guard_attacks.py): the repository root holds `demos`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from demos.sites import DemoSites
from session_keeper import Durability, Grant, Guard, LoginSettings, PlaywrightBackend, SessionKeeper
from session_keeper._model.cookies import Cookie
from session_keeper.errors import IntegrityError, SessionKeeperError
from session_keeper.security import AuditLog, Keyring, verify_audit
from session_keeper.stores import SqliteStore
from session_keeper.testing import CHROMIUM_TEST_ARGS, LocalSites, allow_third_party_cookies

BILLING = "billing.example"
LOGIN_COOKIE = "billing_session"
#: Makes docs.example a secure context, so it *could* register a service worker.
#: The speculation page's two rules, as Chromium's Preload domain names their attempts
#: (action, query of the URL).
_SPECULATIONS = frozenset({("Prefetch", "specprefetch=1"), ("Prerender", "prerender=1")})
#: Preload statuses after which an attempt sends nothing more.
_SETTLED = frozenset({"Ready", "Success", "Failure", "NotSupported"})
SECURE_DOCS = "--unsafely-treat-insecure-origin-as-secure=http://docs.example"

Expected = Literal["blocked", "allowed"]


@attrs.frozen(kw_only=True)
class Attempt:
    """One attack and what the server saw of it."""

    name: str
    conversation: str
    expected: Expected
    #: The login cookie's SameSite attribute on the sites it ran against.
    site: str = "Lax"
    host: str
    #: Requests that reached ``host`` during the attempt.
    arrived: int
    #: Of those, requests that carried the login cookie.
    with_login: int
    #: The Guard answered at least one request of the attempt in the browser.
    blocked_in_browser: bool
    #: What is meant to stop it: ``"guard"``, or ``"browser"`` (service workers are
    #: blocked in the context, so no request is ever made for the Guard to answer), or
    #: ``"either"`` (the browser may not send it at all; if it does, the Guard refuses).
    stopped_by: str = "guard"

    @property
    def leaked(self) -> int:
        """Requests that should have been stopped but reached the site with the login."""
        return self.with_login if self.expected == "blocked" else 0

    @property
    def ok(self) -> bool:
        """Blocked attempts reached nothing; allowed ones reached the site signed in."""
        if self.expected == "blocked":
            return self.arrived == 0 and (self.blocked_in_browser or self.stopped_by != "guard")
        return self.with_login > 0


@attrs.frozen(kw_only=True)
class SuiteReport:
    """Everything the suite measured."""

    attempts: tuple[Attempt, ...]
    #: Requests to billing.example with the login cookie from ``research`` while it held no
    #: grant, counted over the whole phase (not only inside attempt windows).
    leaked_requests: int
    sw_registrations: int
    canary_hits: tuple[str, ...]
    audit_entries: int
    audit_ok: bool

    @property
    def ok(self) -> bool:
        """No leak, every attempt as expected, no canary anywhere, audit chain intact."""
        return (
            self.leaked_requests == 0
            and all(a.ok for a in self.attempts)
            and not self.canary_hits
            and self.sw_registrations == 0
            and self.audit_ok
        )

    def rows(self) -> list[str]:
        """The table, one row per attempt."""
        out = [
            f"{'cookie':<6} {'attempt':<38} {'conv':<9} {'expected':<8} {'arrived':>7} "
            f"{'w/login':>7}  ok"
        ]
        for a in self.attempts:
            out.append(
                f"{a.site:<6} {a.name:<38} {a.conversation:<9} {a.expected:<8} {a.arrived:>7} "
                f"{a.with_login:>7}  {'yes' if a.ok else 'NO'}"
            )
        return out

    def result_line(self) -> str:
        """The last line: ``RESULT attempts=N leaked_requests=0 canary_hits=0 ...``."""
        blocked = sum(1 for a in self.attempts if a.expected == "blocked")
        sites = "+".join(dict.fromkeys(a.site for a in self.attempts))
        return (
            f"RESULT attempts={len(self.attempts)} sites={sites} blocked={blocked} "
            f"allowed={len(self.attempts) - blocked} "
            f"failed={sum(1 for a in self.attempts if not a.ok)} "
            f"sw_registrations={self.sw_registrations} "
            f"audit_entries={self.audit_entries} audit_ok={int(self.audit_ok)} "
            f"leaked_requests={self.leaked_requests} canary_hits={len(self.canary_hits)}"
        )

    @classmethod
    def combine(cls, reports: Iterable[SuiteReport]) -> SuiteReport:
        """One report over several runs (the Lax and the SameSite=None sites)."""
        reports = list(reports)
        return cls(
            attempts=tuple(a for r in reports for a in r.attempts),
            leaked_requests=sum(r.leaked_requests for r in reports),
            sw_registrations=sum(r.sw_registrations for r in reports),
            canary_hits=tuple(h for r in reports for h in r.canary_hits),
            audit_entries=sum(r.audit_entries for r in reports),
            audit_ok=all(r.audit_ok for r in reports),
        )


@contextmanager
def captured_logs() -> Iterator[io.StringIO]:
    """Capture every session_keeper log record (DEBUG and up), with its extras."""
    buffer = io.StringIO()

    class Everything(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            buffer.write(record.getMessage() + " " + repr(record.__dict__) + "\n")

    handler = Everything(logging.DEBUG)
    root = logging.getLogger("session_keeper")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield buffer
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


class Suite:
    """Runs the attempts against one keeper + Guard on real Chromium."""

    def __init__(self, keeper: SessionKeeper[Page], guard: Guard, sites: LocalSites) -> None:
        self.keeper = keeper
        self.guard = guard
        self.sites = sites
        self.attempts: list[Attempt] = []

    async def attempt(
        self,
        name: str,
        conversation: str,
        expected: Expected,
        act: Callable[[Page], Awaitable[None]],
        *,
        host: str = BILLING,
        stopped_by: str = "guard",
    ) -> Attempt:
        """Run ``act`` on the conversation's tab; count what reached ``host``."""
        print(f"  [{self.sites.samesite}] {name} ...", file=sys.stderr, flush=True)
        await self.keeper.ensure(conversation)
        page = await self.keeper.unguarded_page(conversation)
        mark = len(self.sites.requests())
        blocks = len(self.guard.blocks)
        await act(page)
        # Favicon fetches are left out: Chromium asks for the granted billing tab's icon
        # whenever it likes (with the login, rightly), in any attempt's window.
        seen = [
            r for r in self.sites.requests()[mark:] if r.host == host and r.path != "/favicon.ico"
        ]
        result = Attempt(
            name=name,
            conversation=conversation,
            expected=expected,
            host=host,
            arrived=len(seen),
            with_login=sum(1 for r in seen if r.cookie(LOGIN_COOKIE) is not None),
            blocked_in_browser=len(self.guard.blocks) > blocks,
            stopped_by=stopped_by,
            site=self.sites.samesite,
        )
        self.attempts.append(result)
        return result


def _docs(sites: LocalSites, path: str) -> str:
    return sites.url("docs.example", path)


async def _blocked_page(page: Page) -> None:
    await page.wait_for_selector("#session-keeper-blocked", state="attached")


async def _refused(guard: Guard, since: int, navigation: Awaitable[object] | None = None) -> None:
    """A top-level navigation the Guard refused (after block ``since``).

    A tab that shows a document keeps it: the navigation is aborted (``goto`` raises),
    so the proof is the Guard's record, not a 403 page.
    """
    if navigation is not None:
        with contextlib.suppress(PlaywrightError):
            await navigation
    async with asyncio.timeout(15):
        await guard.wait_for_block(
            lambda b: (b.resource_type or "").lower() == "document", since=since
        )


async def run_suite(
    sites: LocalSites,
    profile: Path,
    db: Path,
    *,
    password: str,
    executable_path: str | None = None,
) -> SuiteReport:
    """Run every attempt on a fresh profile and store; search for the canaries."""
    planted = "canary-cookie-" + secrets.token_hex(8)
    keyring = Keyring.generate()
    errors: list[str] = []
    # Cross-site cookies flow as in a user's Chrome (this Chromium blocks them by default).
    allow_third_party_cookies(profile)
    with captured_logs() as logs:
        backend = PlaywrightBackend(
            profile,
            executable_path=executable_path,
            host_resolver_rules=sites.host_resolver_rules,
            args=[SECURE_DOCS, *CHROMIUM_TEST_ARGS],
        )
        store = SqliteStore(str(db))
        async with store:
            keeper: SessionKeeper[Page] = SessionKeeper(
                backend,
                durability=Durability(store=store),
                grants=[Grant("billing", BILLING, actions={"read", "write"})],
                login_settings=LoginSettings(fingerprint_key=secrets.token_bytes(32)),
            )
            audit = AuditLog(store, keyring)
            guard = Guard(keeper, audit=audit)
            async with keeper:
                report_parts = await _attacks(
                    backend, keeper, guard, sites, password, planted, errors
                )
            await backend.aclose()
            try:
                entries = await verify_audit(store, keyring, expected_head=audit.head)
                audit_ok = True
            except IntegrityError:
                entries, audit_ok = 0, False
            events = await store.events(limit=100_000)
        sw_registrations, login_value = report_parts[1], report_parts[2]
        attempts = report_parts[0]
    canaries = {"password": password, "login cookie": login_value, "planted cookie": planted}
    hits = search_canaries(
        canaries,
        {
            "sqlite": b"".join(
                f.read_bytes() for f in sorted(db.parent.glob(db.name + "*")) if f.is_file()
            ),
            "events": repr([e.to_dict() for e in events]).encode(),
            "logs": logs.getvalue().encode(),
            "errors": "\n".join(errors).encode(),
        },
    )
    leaked = sum(a.leaked for a in attempts)
    return SuiteReport(
        attempts=tuple(attempts),
        leaked_requests=leaked,
        sw_registrations=sw_registrations,
        canary_hits=tuple(hits),
        audit_entries=entries,
        audit_ok=audit_ok,
    )


def search_canaries(canaries: dict[str, str], places: dict[str, bytes]) -> list[str]:
    """``"<canary> in <place>"`` for every canary found in a place (raw, hex or base64)."""
    import base64

    hits = []
    for cname, value in canaries.items():
        raw = value.encode()
        forms = (raw, raw.hex().encode(), base64.b64encode(raw), base64.urlsafe_b64encode(raw))
        for pname, data in places.items():
            if any(f in data for f in forms):
                hits.append(f"{cname} in {pname}")
    return hits


async def _attacks(
    backend: PlaywrightBackend,
    keeper: SessionKeeper[Page],
    guard: Guard,
    sites: LocalSites,
    password: str,
    planted: str,
    errors: list[str],
) -> tuple[list[Attempt], int, str]:
    suite = Suite(keeper, guard, sites)
    #: billing.example's origin on these sites (http for Lax, https for SameSite=None).
    target = f"{sites.scheme}://{BILLING}"
    socket_target = f"{'wss' if sites.scheme == 'https' else 'ws'}://{BILLING}"

    def aim(js: str) -> str:
        """``js`` aimed at this run's billing origin."""
        return js.replace("http://billing.example", target)

    # The human signs billing in; the password is a canary.
    await keeper.ensure("billing")
    page = await keeper.unguarded_page("billing", sites.url(BILLING, "/login"))
    await page.fill("input[name=username]", "alice")
    await page.fill("input[name=password]", password)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    await keeper.record_login("billing", BILLING, account="alice")
    session = backend.current  # the live browser, for the canary's value
    assert session is not None
    login_value = next(c.value for c in await session.cookies() if c.name == LOGIN_COOKIE)

    async def billing_reads(p: Page) -> None:
        await p.goto(sites.url(BILLING, "/invoices"))
        await p.wait_for_selector("#invoices")

    await suite.attempt("billing reads its invoices", "billing", "allowed", billing_reads)

    await keeper.ensure("research")
    await keeper.unguarded_page("research", _docs(sites, "/"))
    phase_mark = len(sites.requests())

    async def navigate(p: Page) -> None:
        await _refused(guard, len(guard.blocks), p.goto(sites.url(BILLING, "/invoices")))

    async def fetch(p: Page) -> None:
        await p.goto(_docs(sites, "/attack/fetch"))
        await p.wait_for_function("document.title === 'done' || document.title === 'failed'")

    async def xhr(p: Page) -> None:
        await p.goto(_docs(sites, "/attack/xhr"))
        await p.wait_for_function("document.title === 'done'")

    async def iframe(p: Page) -> None:
        await p.goto(_docs(sites, "/attack/iframe"))
        await (
            p.frame_locator("#frame").locator("#session-keeper-blocked").wait_for(state="attached")
        )

    async def popup(p: Page) -> None:
        await p.goto(_docs(sites, "/attack/popup"))
        async with p.expect_popup() as info:
            await p.click("#open")
        opened = await info.value
        await _blocked_page(opened)
        await opened.close()

    async def form_post(p: Page) -> None:
        # The page submits its form while it is parsed; once that navigation is refused,
        # Chromium never fires the page's load event, so a goto waiting for it would only
        # end at its 30 s timeout: wait for the commit, then for the Guard's record.
        since = len(guard.blocks)
        await _refused(guard, since, p.goto(_docs(sites, "/attack/form"), wait_until="commit"))

    async def img(p: Page) -> None:
        await p.goto(_docs(sites, "/attack/img"))
        await p.wait_for_function("document.getElementById('img').complete")

    async def redirect(p: Page) -> None:
        since = len(guard.blocks)
        await _refused(guard, since, p.goto(_docs(sites, f"/redirect?to={target}/invoices")))

    sw_registrations = 0

    async def service_worker(p: Page) -> None:
        nonlocal sw_registrations
        await p.goto(_docs(sites, "/attack/sw"))
        await p.wait_for_function("document.title !== 'service worker attack'")
        sw_registrations = int(
            await p.evaluate("navigator.serviceWorker.getRegistrations().then(r => r.length)")
        )

    async def popup_redirect(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        async with p.expect_popup() as info:
            await p.evaluate(
                aim(
                    "window.open('/redirect?to=' + encodeURIComponent('http://billing.example/invoices'))"
                )
            )
        opened = await info.value
        await _blocked_page(opened)
        await opened.close()

    async def iframe_redirect(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            aim(
                "() => { const f = document.createElement('iframe'); f.id = 'frame';"
                " f.src = '/redirect?to=' + encodeURIComponent('http://billing.example/invoices');"
                " document.body.appendChild(f); }"
            )
        )
        await (
            p.frame_locator("#frame").locator("#session-keeper-blocked").wait_for(state="attached")
        )

    async def fetch_redirect(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            aim(
                "fetch('/redirect?to=' + encodeURIComponent('http://billing.example/invoices'),"
                " {credentials: 'include'}).then(r => r.status, () => 0)"
            )
        )

    async def worker(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            aim(
                "new Promise(done => { const w = new Worker(URL.createObjectURL(new Blob(["
                "\"fetch('http://billing.example/invoices', {credentials: 'include',"
                " mode: 'no-cors'})"
                '.then(() => postMessage(1), () => postMessage(0))"]))); w.onmessage = done; })'
            )
        )

    docs_origin = f"{sites.scheme}://docs.example"
    via_redirect = f"{docs_origin}/redirect?to=" + f"{target}/invoices".replace("?", "%3F")

    async def worker_redirect(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            "(u) => new Promise(done => { const w = new Worker(URL.createObjectURL(new Blob(["
            "`fetch('${u}', {credentials: 'include', mode: 'no-cors'})"
            ".then(() => postMessage(1), () => postMessage(0))`]))); w.onmessage = done; })",
            via_redirect,
        )

    async def shared_worker(p: Page, url: str) -> None:
        await p.goto(_docs(sites, "/"))
        # PlaywrightBackend launches without shared workers (no page's interception
        # sees their requests): the constructor is not there to call.
        await p.evaluate(
            "(u) => typeof SharedWorker === 'undefined' ? 'unavailable' :"
            " new Promise(done => { const w = new SharedWorker(URL.createObjectURL("
            "new Blob([`onconnect = (e) => { const port = e.ports[0];"
            " fetch('${u}', {credentials: 'include', mode: 'no-cors'})"
            ".then(() => port.postMessage(1), () => port.postMessage(0)); }`])));"
            " w.port.onmessage = done; w.port.start(); })",
            url,
        )

    async def shared_worker_direct(p: Page) -> None:
        await shared_worker(p, f"{target}/invoices?shared=1")

    async def shared_worker_redirect(p: Page) -> None:
        await shared_worker(p, via_redirect)

    async def frame_first_request(p: Page) -> None:
        await p.goto(_docs(sites, "/attack/frame"))
        await p.frame_locator("#frame").locator("#img").wait_for(state="attached")
        await p.wait_for_function("() => document.getElementById('frame').contentWindow !== null")
        frame = p.frame_locator("#frame")
        await frame.locator("#img").evaluate(
            "(img) => img.complete || new Promise(ok => { img.onload = img.onerror = ok; })"
        )

    async def beacon(p: Page) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(aim("navigator.sendBeacon('http://billing.example/card', 'card=4000')"))
        await guard.wait_for_block(lambda b: b.path == "/card", since=since)

    async def websocket(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            f"new Promise(done => {{ const ws = new WebSocket('{socket_target}/ws');"
            " ws.onclose = done; ws.onerror = done; ws.onopen = done; })"
        )

    async def prefetch(p: Page) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/attack/prefetch"))
        await guard.wait_for_block(lambda b: b.origin == target, since=since)

    async def blocked_after(p: Page, since: int) -> None:
        """Wait (15 s at most) until the Guard refused a request to billing after ``since``."""
        async with asyncio.timeout(15):
            await guard.wait_for_block(lambda b: b.origin == target, since=since)

    async def inject(p: Page, markup: str) -> None:
        """Put ``markup`` (aimed at billing) into a fresh docs.example page; wait for a block."""
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            "(m) => { document.body.insertAdjacentHTML('beforeend', m); }", aim(markup)
        )
        await blocked_after(p, since)

    async def ping(p: Page) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            aim(
                "() => { const a = document.createElement('a'); a.id = 'ping';"
                " a.href = '/guide'; a.ping = 'http://billing.example/invoices?ping=1';"
                " a.textContent = 'go'; document.body.appendChild(a); }"
            )
        )
        await p.click("#ping")
        await blocked_after(p, since)

    async def on_pagehide(p: Page, js: str) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(aim("() => { addEventListener('pagehide', () => { " + js + " }); }"))
        await p.goto(_docs(sites, "/guide"))  # navigating away fires it
        await blocked_after(p, since)

    async def keepalive(p: Page) -> None:
        await on_pagehide(
            p,
            "fetch('http://billing.example/card', {method: 'POST', keepalive: true,"
            " mode: 'no-cors', credentials: 'include', body: 'card=4000'});",
        )

    async def pagehide_beacon(p: Page) -> None:
        await on_pagehide(p, "navigator.sendBeacon('http://billing.example/card', 'card=4000');")

    async def event_source(p: Page) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            aim(
                "() => { window.es = new EventSource('http://billing.example/invoices?sse=1',"
                " {withCredentials: true}); }"
            )
        )
        await blocked_after(p, since)
        await p.evaluate("() => window.es.close()")

    async def css_import(p: Page) -> None:
        await inject(p, "<style>@import url('http://billing.example/invoices?css=1');</style>")

    async def css_font(p: Page) -> None:
        await inject(
            p,
            "<style>@font-face { font-family: leak;"
            " src: url('http://billing.example/invoices?font=1'); }"
            " #f { font-family: leak; }</style><p id='f'>text in the font</p>",
        )

    async def css_image(p: Page) -> None:
        await inject(
            p,
            '<div style="width: 9px; height: 9px;'
            " background-image: url('http://billing.example/invoices?bg=1')\"></div>",
        )

    async def embedded_object(p: Page) -> None:
        await inject(
            p, "<object type='text/html' data='http://billing.example/invoices?object=1'></object>"
        )

    async def embed(p: Page) -> None:
        await inject(p, "<embed type='text/html' src='http://billing.example/invoices?embed=1'>")

    async def form_into_frame(p: Page) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            aim(
                "() => { document.body.insertAdjacentHTML('beforeend',"
                " \"<iframe name='sink'></iframe><form id='ff' method='post' target='sink'"
                " action='http://billing.example/card'><input name='card' value='4000'>"
                "</form>\"); document.getElementById('ff').submit(); }"
            )
        )
        await blocked_after(p, since)

    async def noopener(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        async with p.context.expect_page() as info:
            await p.evaluate(
                aim(
                    "window.open('http://billing.example/invoices?noopener=1', '_blank',"
                    " 'noopener')"
                )
            )
        opened = await info.value
        # No opener: the window belongs to no conversation. Its first navigation is
        # held (a local holding page) and, owned by nobody, never re-issued; were it
        # re-issued, the login would be refused to a page nobody owns.
        await opened.wait_for_load_state()
        await opened.close()

    async def speculation(p: Page) -> None:
        since = len(guard.blocks)
        # Chromium prerenders same-site pages only and prefetches cross-site ones
        # without cookies: it may send nothing at all for the Guard to refuse. Its
        # Preload domain says when each of the page's speculations is settled (loaded,
        # failed, or never tried): by then whatever it sent has been sent.
        cdp = await p.context.new_cdp_session(p)
        status: dict[tuple[str, str], str] = {}
        settled = asyncio.Event()

        def updated(event: dict[str, Any]) -> None:
            key = event["key"]
            status[(key["action"], key["url"].rsplit("?", 1)[-1])] = event["status"]
            if status.keys() >= _SPECULATIONS and all(s in _SETTLED for s in status.values()):
                settled.set()

        cdp.on("Preload.prefetchStatusUpdated", updated)
        cdp.on("Preload.prerenderStatusUpdated", updated)
        await cdp.send("Preload.enable")
        try:
            await p.goto(_docs(sites, "/attack/speculation"))
            block = asyncio.ensure_future(blocked_after(p, since))
            done = asyncio.ensure_future(settled.wait())
            # A refusal, or every speculation settled without one (15 s at most).
            await asyncio.wait({block, done}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
            for waiter in (block, done):
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                    await waiter
        finally:
            await cdp.detach()

    async def download_click(p: Page) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            aim(
                "() => { const a = document.createElement('a'); a.id = 'dl'; a.download = '';"
                " a.href = 'http://billing.example/invoices?download=1'; a.textContent = 'get';"
                " document.body.appendChild(a); a.click(); }"
            )
        )
        # ``download`` is ignored across origins: it navigates, and is refused.
        await _refused(guard, since)

    def chain(final: str) -> str:
        """docs (301) → todo (302) → sso (307) → docs (308) → ``final``: three sites' hops."""
        url = final
        for host, code in (("docs.example", 308), ("sso.example", 307), ("todo.example", 302)):
            url = sites.url(host, f"/redirect?code={code}&to=") + quote(url, safe="")
        return _docs(sites, "/redirect?code=301&to=") + quote(url, safe="")

    async def redirect_chain(p: Page) -> None:
        since = len(guard.blocks)
        await _refused(guard, since, p.goto(chain(f"{target}/invoices?chain=1")))

    async def redirect_chain_post(p: Page) -> None:
        since = len(guard.blocks)
        await p.goto(_docs(sites, "/"))
        await p.evaluate(
            "(u) => fetch(u, {method: 'POST', mode: 'no-cors', credentials: 'include',"
            " body: 'card=4000'}).catch(() => 0)",
            chain(f"{target}/card"),
        )
        await blocked_after(p, since)

    attacks: list[tuple[str, Callable[[Page], Awaitable[None]]]] = [
        ("top-level navigation", navigate),
        ("fetch with credentials", fetch),
        ("XHR withCredentials", xhr),
        ("iframe", iframe),
        ("window.open popup", popup),
        ("form POST", form_post),
        ("<img> subresource", img),
        ("redirect from docs.example", redirect),
        ("popup through a redirect", popup_redirect),
        ("iframe through a redirect", iframe_redirect),
        ("fetch through a redirect", fetch_redirect),
        ("<link rel=prefetch>", prefetch),
        ("<a ping>", ping),
        ("keepalive fetch on pagehide", keepalive),
        ("sendBeacon on pagehide", pagehide_beacon),
        ("EventSource", event_source),
        ("CSS @import", css_import),
        ("CSS url() font", css_font),
        ("CSS url() image", css_image),
        ("<object>", embedded_object),
        ("<embed>", embed),
        ("form POST into a frame", form_into_frame),
        ("<a download>", download_click),
        ("301/302/307/308 chain, 3 sites", redirect_chain),
        ("POST through a 3-site chain", redirect_chain_post),
        ("fetch from a Worker", worker),
        ("Worker fetch through a redirect", worker_redirect),
        ("cross-site frame's first request", frame_first_request),
        ("navigator.sendBeacon", beacon),
        ("WebSocket handshake", websocket),
    ]
    for name, act in attacks:
        await suite.attempt(name, "research", "blocked", act)
    await suite.attempt(
        "service worker registration", "research", "blocked", service_worker, stopped_by="browser"
    )
    await suite.attempt(
        "window.open noopener", "research", "blocked", noopener, stopped_by="either"
    )
    await suite.attempt(
        "speculation rules prerender", "research", "blocked", speculation, stopped_by="either"
    )
    for name, act in (
        ("fetch from a SharedWorker", shared_worker_direct),
        ("SharedWorker fetch through a redirect", shared_worker_redirect),
    ):
        await suite.attempt(name, "research", "blocked", act, stopped_by="browser")
    phase = [r for r in sites.requests()[phase_mark:] if r.host == BILLING]
    leaked_in_phase = sum(1 for r in phase if r.cookie(LOGIN_COOKIE) is not None)
    # Named in the row, should one ever show: which requests they were.
    late_paths = sorted({r.path for r in phase if r.cookie(LOGIN_COOKIE) is not None})

    # A read-only grant: reading passes, writing does not.
    keeper.grant(Grant("research", BILLING, actions={"read"}))

    async def read_invoices(p: Page) -> None:
        await p.goto(sites.url(BILLING, "/invoices"))
        await p.wait_for_selector("#invoices")

    async def write_card(p: Page) -> None:
        since = len(guard.blocks)
        await p.evaluate(
            "() => { const f = document.createElement('form'); f.method = 'post';"
            " f.action = '/card'; const i = document.createElement('input'); i.name = 'card';"
            " i.value = '4000000000000002'; f.appendChild(i); document.body.appendChild(f);"
            " f.submit(); }"
        )
        await _refused(guard, since)

    async def post_card(p: Page, expected_status: int) -> None:
        status = await p.evaluate(
            "fetch('/card', {method: 'POST',"
            " body: new URLSearchParams({card: '4000000000000002'})})"
            ".then(r => r.status)"
        )
        assert status == expected_status, status

    async def fetch_post(p: Page) -> None:
        # The tab is on billing.example (it kept its page when the form was refused).
        await post_card(p, 403)

    await suite.attempt("GET with a read-only grant", "research", "allowed", read_invoices)
    await suite.attempt("form POST with a read-only grant", "research", "blocked", write_card)
    await suite.attempt("fetch POST with a read-only grant", "research", "blocked", fetch_post)

    # A one-time write borrow: exactly one write reaches the site, the next is refused.
    keeper.approve_borrow("research", BILLING, "write", approved_by="alice")

    async def fetch_post_allowed(p: Page) -> None:
        # From the page the refused form left the tab on: it still reaches the site.
        await post_card(p, 200)

    await suite.attempt("write on a one-time borrow", "research", "allowed", fetch_post_allowed)
    await suite.attempt("second write on that borrow", "research", "blocked", fetch_post)
    keeper.revoke("research", BILLING)

    # An origin allowlist: research may use docs.example only.
    guard.allow_origins("research", [f"{sites.scheme}://docs.example"])

    async def outside_allowlist(p: Page) -> None:
        await _refused(guard, len(guard.blocks), p.goto(sites.url("sso.example", "/")))

    async def subresource_outside(p: Page) -> None:
        await p.goto(_docs(sites, "/"))
        todo = f"{sites.scheme}://todo.example"
        await p.evaluate(f"fetch('{todo}/').catch(() => 0)")
        await guard.wait_for_block(lambda b: b.origin == todo)

    await suite.attempt(
        "navigation outside the allowlist",
        "research",
        "blocked",
        outside_allowlist,
        host="sso.example",
    )
    await suite.attempt(
        "fetch outside the allowlist",
        "research",
        "blocked",
        subresource_outside,
        host="todo.example",
    )
    guard.clear_origins("research")

    # Canaries in every other place the keeper might write: a planted login, errors.
    assert session is not None
    await session.add_cookies([Cookie(name="sso_session", value=planted, domain="sso.example")])
    await keeper.record_login("billing", "sso.example", account="alice")
    try:
        await keeper.record_login("billing", "todo.example")
    except SessionKeeperError as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    await keeper.persist()

    attempts = list(suite.attempts)
    # The phase-wide count catches a late request that fell outside any attempt window.
    if leaked_in_phase > sum(a.leaked for a in attempts):
        attempts.append(
            Attempt(
                name=f"late requests in the no-grant phase {' '.join(late_paths)}",
                conversation="research",
                expected="blocked",
                host=BILLING,
                arrived=len(phase),
                with_login=leaked_in_phase,
                blocked_in_browser=False,
                site=sites.samesite,
            )
        )
    return attempts, sw_registrations, login_value


async def main_async() -> int:
    reports = []
    # The same suite twice: billing's login cookie SameSite=Lax over HTTP, then
    # SameSite=None; Secure over HTTPS (sent with cross-site requests too).
    samesite: Literal["Lax", "None"]
    for samesite in ("Lax", "None"):
        password = "canary-pw-" + secrets.token_hex(8)
        with (
            DemoSites(billing_accounts={"alice": password}, samesite=samesite) as sites,
            tempfile.TemporaryDirectory(prefix="sk-guard-") as tmp,
        ):
            reports.append(
                await run_suite(
                    sites, Path(tmp) / "profile", Path(tmp) / "keeper.db", password=password
                )
            )
    report = SuiteReport.combine(reports)
    print("Guard attack suite (real Chromium, local sites; counts from the server's request log)")
    for row in report.rows():
        print(row)
    for hit in report.canary_hits:
        print(f"CANARY {hit}")
    print(report.result_line())
    return 0 if report.ok else 1


def main() -> int:
    """Run the suite; exit status 1 on any leak, canary hit or unexpected outcome."""
    return asyncio.run(main_async())


if __name__ == "__main__":
    sys.exit(main())
