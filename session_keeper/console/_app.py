"""The console: a small Starlette app on uvicorn, mounted in the keeper's own process.

Read the module docstring of :mod:`session_keeper.console` for how to run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import quote, urlencode, urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from session_keeper._keeper.facade.person_sign_ins import PersonSignIns, web_url
from session_keeper._model.cookies import normalize_site
from session_keeper._model.grants import check_name
from session_keeper._util.surfaces import serve_surface
from session_keeper.console._auth import Auth, Session, check_bind, is_loopback, parse_bind
from session_keeper.console._http import EmbeddedServer, Refused, SecurityHeaders
from session_keeper.console._replay import ReplayPages
from session_keeper.console._views import gather, paused_jobs
from session_keeper.errors import (
    BrowserError,
    InvalidArgument,
    JobNotFound,
    LeaseHeldError,
    LoginNotObserved,
    PolicyRefusal,
    SessionKeeperError,
    UsageError,
)

if TYPE_CHECKING:
    from session_keeper._keeper.facade.keeper import SessionKeeper
    from session_keeper.jobs._loop import JobLoop
    from session_keeper.stores import Store

__all__ = ["Console"]

_HERE = Path(__file__).parent
_SECTIONS = ("browsers", "conversations", "logins", "borrows", "jobs", "events")
#: The most one form field may hold (a URL, an account name).
_MAX_FIELD = 2048


class Console:
    """The web console: pages over a keeper and a Store, a live view, approvals.

    ``keeper`` is the SessionKeeper of *this* process (live pages, the live view,
    borrow approvals, sign-in hand-off); ``store`` defaults to the keeper's (or the
    loop's) store and supplies jobs, events and what other processes' keepers saved;
    ``loop`` (a :class:`~session_keeper.JobLoop` on that keeper) lets the console resume
    paused jobs. With only a ``store`` the console is read-only.

    ``bind`` is ``host:port`` (port 0 picks a free one); a non-loopback host raises
    :class:`InvalidArgument` unless ``allow_remote``. ``user`` names the holder of the
    bearer token (and the person of the first login link). Opening a live view begins a
    takeover of that conversation (the sweep leaves its tab alone) for ``takeover_ttl``;
    *I'm done* ends it. Raises
    :class:`UsageError` when given neither a keeper nor a store.
    """

    def __init__(
        self,
        keeper: SessionKeeper[Any] | None = None,
        *,
        store: Store | None = None,
        loop: JobLoop[Any] | None = None,
        bind: str = "127.0.0.1:8765",
        allow_remote: bool = False,
        user: str = "operator",
        takeover_ttl: timedelta = timedelta(minutes=15),
        live_link_ttl: timedelta = timedelta(hours=1),
        events: int = 50,
    ) -> None:
        self.host, self.port = parse_bind(bind)
        check_bind(self.host, allow_remote=allow_remote)
        self.user = check_name(user, "user")
        if store is None:
            store = keeper.store if keeper is not None else None
            if store is None and loop is not None:
                store = loop.store
        if keeper is None and store is None:
            raise UsageError("the console needs a keeper (this process) or a store")
        if loop is not None and keeper is not None and loop.keeper is not keeper:
            raise InvalidArgument("loop must run on the console's keeper")
        self.keeper = keeper
        self.store = store
        self.loop = loop
        self.takeover_ttl = takeover_ttl
        self.live_link_ttl = live_link_ttl
        self.events = events
        self.auth = Auth(bearer_user=self.user)
        self._allow_remote = allow_remote
        self._flash: dict[str, str] = {}
        self._sign_ins = PersonSignIns()
        self._templates = Jinja2Templates(directory=str(_HERE / "templates"))
        self._templates.env.filters["segment"] = _segment
        self._server: EmbeddedServer | None = None
        self._socket: socket.socket | None = None
        self._surface = contextlib.ExitStack()
        self._task: asyncio.Task[None] | None = None
        replay = ReplayPages(
            session=self._session,
            render=self._page,
            recorder=lambda: None if self.keeper is None else self.keeper.replay,
            store=store,
        )
        self.app: ASGIApp = SecurityHeaders(
            Starlette(
                routes=[
                    Route("/", self._index),
                    Route("/login", self._login),
                    Route("/logout", self._logout, methods=["POST"]),
                    Route("/static/{name}", self._static),
                    Route("/api/state", self._api_state),
                    *(Route(f"/{s}", self._section) for s in _SECTIONS),
                    # ``:path``: an id may hold "/" (sent as %2F, see _segment). The fixed
                    # suffix after it is what the (greedy) id never swallows.
                    Route("/borrows/{request_id:path}/answer", self._answer, methods=["POST"]),
                    Route("/jobs/{job_id:path}/resume", self._resume, methods=["POST"]),
                    Route("/live/{conversation:path}/navigate", self._navigate, methods=["POST"]),
                    Route("/live/{conversation:path}/done", self._done, methods=["POST"]),
                    Route("/live/{conversation:path}", self._live),
                    Route("/replay/{conversation:path}/frames/{seq:int}/dom", replay.dom),
                    Route("/replay/{conversation:path}/frames/{seq:int}", replay.frame),
                    Route("/replay/{conversation:path}", replay.timeline),
                    WebSocketRoute("/live/{conversation:path}/ws", self._live_ws),
                ],
                exception_handlers={Refused: self._refused},
            )
        )

    # -- lifetime ---------------------------------------------------------------------
    async def start(self) -> None:
        """Start serving (returns once listening; port 0 is then the real port).

        The host application keeps its own signal handlers. Raises :class:`OSError`
        when the address is taken.
        """
        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            log_level="warning",
            ws="websockets-sansio",
            lifespan="off",
            timeout_graceful_shutdown=3,
        )
        # Bound here, not by uvicorn: a taken address is an OSError for the caller, not
        # uvicorn's sys.exit() inside the host application's event loop.
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = int(sock.getsockname()[1])
        # While it serves, no conversation's page may reach it (the Guard's rule 'self').
        self._surface.enter_context(serve_surface("console", self.host, self.port))
        server = EmbeddedServer(config)
        self._server, self._socket = server, sock
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():
                self._surface.close()
                self._task.result()
                raise UsageError("the console stopped before it started")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        """Stop serving; idempotent."""
        server, task = self._server, self._task
        self._server = self._task = None
        await self._sign_ins.close(self.keeper)
        if server is not None and task is not None:
            server.should_exit = True
            await task
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._surface.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- links ------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The console's base URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def login_link(self, user: str | None = None) -> str:
        """A one-time sign-in link for ``user`` (default: the console's ``user``).

        Spent on first use and void after 15 minutes; it sets a session cookie.
        """
        who = self.user if user is None else check_name(user, "user")
        return f"{self.url}/login?{urlencode({'code': self.auth.issue_link_code(who)})}"

    def sign_in_link(
        self, conversation: str, *, user: str | None = None, url: str | None = None
    ) -> str:
        """A one-time link for a person to sign ``conversation`` in to a site.

        Opening it starts a session that sees only that conversation's live view (no
        approvals, jobs or other conversations), lands on it, and is spent on first use;
        void after 15 minutes. The person signs in on a sign-in page of the keeper's
        (:meth:`~session_keeper.SessionKeeper.sign_in_tab`), never the conversation's
        tab: no page the model drives, nor one it opened, reaches what they type.
        ``url``: the address that page opens at (default: where the conversation's tab
        is). ``user`` names the person in the audit chain (default: the console's
        ``user``). Safe to hand to the person through an agent: the model never gets the
        site's password, and the link opens nothing the person does not do. Raises
        :class:`InvalidArgument` for a ``url`` that is not http(s).
        """
        conversation = check_name(conversation, "conversation")
        who = self.user if user is None else check_name(user, "user")
        if url is not None:
            if web_url(url) is None or len(url) > _MAX_FIELD:
                raise InvalidArgument("a sign-in link opens only an http or https address")
            self._sign_ins.ask(conversation, url)
        code = self.auth.issue_link_code(who, only_live=conversation)
        return f"{self.url}/login?{urlencode({'code': code})}"

    def live_path(self, conversation: str, *, expires_in: timedelta | None = None) -> str:
        """The signed path of ``conversation``'s live view (the link a person is sent)."""
        conversation = check_name(conversation, "conversation")
        ttl = self.live_link_ttl if expires_in is None else expires_in
        exp = int(time.time() + ttl.total_seconds())
        sig = self.auth.sign_live(conversation, exp)
        return f"/live/{_segment(conversation)}?{urlencode({'exp': exp, 'sig': sig})}"

    def live_link(self, conversation: str, *, expires_in: timedelta | None = None) -> str:
        """The full signed URL of ``conversation``'s live view (needs a signed-in session)."""
        return self.url + self.live_path(conversation, expires_in=expires_in)

    # -- request plumbing ---------------------------------------------------------------
    def _check_host(self, headers: Any) -> None:
        # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host.
        if self._allow_remote:
            return
        host = urlsplit("//" + (headers.get("host") or "")).hostname or ""
        if not is_loopback(host):
            raise Refused(421, "this console answers to loopback host names only")

    def _check_origin(self, headers: Any) -> None:
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{headers.get('host')}":
            raise Refused(403, "cross-origin request refused")

    def _session(self, request: Request | WebSocket) -> tuple[Session, str | None]:
        self._check_host(request.headers)
        sid = request.cookies.get(self.auth.cookie_name)
        session = self.auth.session(sid)
        if session is not None:
            if session.only_live is not None:
                self._check_scope(request, session.only_live)
            return session, sid
        bearer = self.auth.bearer(request.headers.get("authorization"))
        if bearer is not None:
            return bearer, None
        raise Refused(401, "sign in with the one-time link the console printed at start")

    @staticmethod
    def _check_scope(request: Request | WebSocket, conversation: str) -> None:
        """A sign-in hand-off's session reaches only its conversation's live view."""
        if request.path_params.get("conversation") == conversation:
            return
        if request.url.path == "/logout":
            return
        raise Refused(
            403,
            f"this sign-in link opens only the live view of {conversation}; nothing else "
            "of the console",
        )

    async def _form(self, request: Request) -> tuple[Session, str | None, dict[str, str]]:
        """A POST's session and fields, after the CSRF and origin checks."""
        session, sid = self._session(request)
        self._check_origin(request.headers)
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str) and len(v) <= _MAX_FIELD}
        if not self.auth.csrf_ok(session, fields.get("csrf")):
            raise Refused(403, "missing or wrong CSRF token; reload the page and try again")
        return session, sid, fields

    async def _refused(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        if "application/json" in request.headers.get("accept", "") or request.url.path.startswith(
            "/api/"
        ):
            return JSONResponse({"error": exc.message}, status_code=exc.status)
        return self._templates.TemplateResponse(
            request, "refused.html", {"message": exc.message}, status_code=exc.status
        )

    def _redirect(self, sid: str | None, to: str, message: str | None = None) -> Response:
        if message is not None and sid is not None:
            self._flash[sid] = message
        return RedirectResponse(to, status_code=303)

    async def _page(
        self, request: Request, name: str, session: Session, sid: str | None, **extra: Any
    ) -> Response:
        data = await gather(self.keeper, self.store, events=self.events)
        context = {
            "user": session.user,
            "csrf": session.csrf or "",
            "flash": self._flash.pop(sid, None) if sid else None,
            "sections": _SECTIONS,
            "data": data,
            "live_keeper": self.keeper is not None,
            "can_resume": self.loop is not None,
            "live_path": self.live_path,
            **extra,
        }
        return self._templates.TemplateResponse(request, name, context)

    # -- pages ----------------------------------------------------------------------------
    async def _login(self, request: Request) -> Response:
        self._check_host(request.headers)
        redeemed = self.auth.redeem(request.query_params.get("code", ""))
        if redeemed is None:
            raise Refused(403, "this sign-in link is spent, expired or wrong; ask for a new one")
        sid, session = redeemed
        # A hand-off's link lands on its live view (the only page its session may open).
        start = "/" if session.only_live is None else self.live_path(session.only_live)
        response = RedirectResponse(start, status_code=303)
        response.set_cookie(self.auth.cookie_name, sid, httponly=True, samesite="strict", path="/")
        return response

    async def _logout(self, request: Request) -> Response:
        _, sid, _ = await self._form(request)
        self.auth.end(sid)
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(self.auth.cookie_name, path="/")
        return response

    async def _static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ("console.css", "live.js"):
            raise Refused(404, "no such file")
        return FileResponse(_HERE / "static" / name)

    async def _index(self, request: Request) -> Response:
        session, sid = self._session(request)
        return await self._page(request, "index.html", session, sid, section=None)

    async def _section(self, request: Request) -> Response:
        session, sid = self._session(request)
        section = request.url.path.strip("/")
        return await self._page(request, f"{section}.html", session, sid, section=section)

    async def _api_state(self, request: Request) -> Response:
        self._session(request)
        return JSONResponse(await gather(self.keeper, self.store, events=self.events))

    # -- actions --------------------------------------------------------------------------
    async def _answer(self, request: Request) -> Response:
        session, sid, form = await self._form(request)
        keeper = self._need_keeper()
        request_id = _path_id(request, "request_id", "request_id")
        decision = form.get("decision")
        if decision not in ("approve", "deny"):
            raise Refused(400, "decision must be approve or deny")
        uses_text = form.get("uses", "1").strip()
        expires_text = form.get("expires_minutes", "").strip()
        try:
            uses = None if uses_text == "unlimited" else int(uses_text)
            expires = timedelta(minutes=int(expires_text)) if expires_text else None
        except ValueError:
            raise Refused(400, "uses must be a number or 'unlimited'; expiry in minutes") from None
        try:
            answered = keeper.answer_borrow(
                request_id,
                approve=decision == "approve",
                by=session.user,
                # A signed-in person, or a program holding the console's bearer token.
                approver="person" if session.csrf is not None else "application",
                uses=uses,
                expires_in=expires,
            )
        except UsageError as exc:
            raise Refused(400, str(exc)) from None
        await keeper.persist()
        verb = "approved" if answered.status == "approved" else "denied"
        return self._redirect(sid, "/borrows", f"{answered.id} {verb} by {session.user}")

    async def _resume(self, request: Request) -> Response:
        session, sid, form = await self._form(request)
        if self.loop is None:
            raise Refused(409, "this console has no job loop; resume from the worker's process")
        job_id = _path_id(request, "job_id", "job_id")
        cancel = form.get("action") == "cancel"
        try:
            cp = await self.loop.resume(job_id, decided_by=session.user, cancel=cancel)
        except LeaseHeldError:
            raise Refused(409, f"{job_id} is held by a worker; try again shortly") from None
        except JobNotFound:
            raise Refused(404, "no such job") from None
        except UsageError as exc:
            raise Refused(400, str(exc)) from None
        return self._redirect(sid, "/jobs", f"{job_id}: {cp.state}")

    def _need_keeper(self) -> SessionKeeper[Any]:
        if self.keeper is None or self.keeper.closed:
            raise Refused(
                409, "no keeper in this process: mount the console in the keeper's process"
            )
        return self.keeper

    def _live_target(self, request: Request | WebSocket, exp: str | None, sig: str | None) -> str:
        conversation = _path_id(request, "conversation", "conversation")
        if not self.auth.live_ok(conversation, exp, sig):
            raise Refused(403, "the live view opens only from a link naming this conversation")
        return str(conversation)

    async def _live(self, request: Request) -> Response:
        session, sid = self._session(request)
        exp, sig = request.query_params.get("exp"), request.query_params.get("sig")
        conversation = self._live_target(request, exp, sig)
        keeper = self._need_keeper()
        sites = []
        if self.store is not None:
            sites = [j.contract.site for j in await paused_jobs(self.store, conversation)]
        sites += [g.site for g in keeper.grants() if g.conversation == conversation]
        ws_query = urlencode({"exp": exp, "sig": sig})
        flash = self._flash.pop(sid, None) if sid else None
        # Right after I'm done the view says so and opens no new sign-in page.
        signed_in = request.query_params.get("signed_in") == "1"
        if not signed_in:
            try:
                # The person arrived: their sign-in page opens now (at the address a
                # sign-in link asked for), so the page they see is the one they type into.
                await self._sign_ins.page(keeper, conversation)
            except SessionKeeperError as exc:
                flash = f"could not open the sign-in page: {exc}"
        return self._templates.TemplateResponse(
            request,
            "live.html",
            {
                "user": session.user,
                "csrf": session.csrf or "",
                "flash": flash,
                "sections": _SECTIONS,
                "section": None,
                "conversation": conversation,
                "quoted": _segment(conversation),
                "exp": exp,
                "sig": sig,
                "ws_query": ws_query,
                "sites": list(dict.fromkeys(s for s in sites if s)),
                "url": self._sign_in_url(keeper, conversation),
                "signed_in": signed_in,
            },
        )

    @staticmethod
    def _sign_in_url(keeper: SessionKeeper[Any], conversation: str) -> str:
        """Where the person's sign-in page is (or will open: the tab's address)."""
        pages = keeper.unguarded_sign_in_pages(conversation)
        url = pages[0].url if pages else keeper.current_url(conversation)
        return web_url(url) or ""

    async def _navigate(self, request: Request) -> Response:
        _, sid, form = await self._form(request)
        conversation = self._live_target(request, form.get("exp"), form.get("sig"))
        keeper = self._need_keeper()
        back = self.live_path(conversation)
        url = form.get("url", "").strip()
        if urlsplit(url).scheme not in ("http", "https"):
            return self._redirect(sid, back, "only http and https addresses can be opened")
        try:
            await self._sign_ins.goto(keeper, conversation, url)
        except (PolicyRefusal, BrowserError) as exc:
            return self._redirect(sid, back, f"could not open the page: {exc}")
        return self._redirect(sid, back)

    async def _done(self, request: Request) -> Response:
        session, sid, form = await self._form(request)
        conversation = self._live_target(request, form.get("exp"), form.get("sig"))
        keeper = self._need_keeper()
        site = form.get("site", "").strip()
        account = form.get("account", "").strip() or None
        back = self.live_path(conversation)
        try:
            record = await keeper.record_login(conversation, site, account=account)
        except LoginNotObserved as exc:
            # Nothing recorded (no new session cookie, or the probe disagrees): say why.
            return self._redirect(sid, back, f"not recorded: {exc}")
        except (UsageError, BrowserError) as exc:
            return self._redirect(sid, back, str(exc))
        # The conversation goes on where the person's sign-in ended, in its own tab.
        not_moved = await self._sign_ins.finish(keeper, conversation)
        keeper.end_takeover(conversation, by=session.user)
        await keeper.persist()
        notes = [f"login to {record.site} recorded for {conversation}"]
        if not_moved is not None:
            notes.append(not_moved)
        if self.loop is not None and self.store is not None:
            for job in await paused_jobs(self.store, conversation):
                site_of_job = job.contract.site
                if site_of_job is not None and normalize_site(site_of_job) != record.site:
                    continue
                try:
                    cp = await self.loop.resume(
                        job.job_id,
                        decided_by=session.user,
                        note="signed in through the console's live view",
                    )
                except LeaseHeldError:
                    notes.append(f"{job.job_id} is held by a worker; resume it shortly")
                    continue
                except UsageError as exc:  # e.g. the pause expired, or waits for another site
                    notes.append(f"{job.job_id} not resumed: {exc}")
                    continue
                notes.append(f"{job.job_id}: {cp.state}")
        # A hand-off's session sees only this live view: it stays there, told what happened
        # (and no new sign-in page opens for it).
        after = f"{back}&signed_in=1" if session.only_live is not None else "/jobs"
        return self._redirect(sid, after, "; ".join(notes))

    async def _live_ws(self, ws: WebSocket) -> None:
        try:
            session, _ = self._session(ws)
            self._check_origin(ws.headers)
            conversation = self._live_target(
                ws, ws.query_params.get("exp"), ws.query_params.get("sig")
            )
            keeper = self._need_keeper()
        except Refused:
            await ws.close(code=1008)
            return
        await ws.accept()
        try:
            # The person types into a sign-in page of the keeper's, never the tab the
            # model drives (a same-origin popup it opened would read its opener).
            page = await self._sign_ins.page(keeper, conversation)
        except SessionKeeperError as exc:
            await ws.send_json({"type": "error", "message": str(exc)})
            await ws.close()
            return
        keeper.begin_takeover(conversation, expires_in=self.takeover_ttl, by=session.user)
        from session_keeper.console._live import LiveView, replay_act

        async def send(frame: dict[str, Any]) -> None:
            # The person may have closed the tab between two frames: nothing to send to.
            with contextlib.suppress(WebSocketDisconnect, RuntimeError):
                await ws.send_json(frame)

        view = LiveView(page, send, popups=lambda: keeper.unguarded_sign_in_pages(conversation))
        recorder = keeper.replay
        await view.start()
        try:
            async for text in _texts(ws):
                try:
                    msg = json.loads(text)
                except ValueError:
                    continue
                if isinstance(msg, dict) and not await view.dispatch(msg):
                    await send({"type": "error", "message": "input not understood"})
                elif recorder is not None and (act := replay_act(msg)) is not None:
                    # The person's own acts are recorded as the agent's are (by name).
                    shown = view.shown
                    await recorder.capture(
                        shown, conversation=conversation, act=act, by=session.user,
                        generation=keeper.generation, popup=True,
                    )  # fmt: skip
        finally:
            await view.stop()


def _segment(value: object) -> str:
    """An id as one URL path segment: every character outside RFC 3986's unreserved set
    percent-encoded, so a "/" or ".." inside an id never becomes a path step a browser
    resolves (``x/../j-victim`` must not reach ``j-victim``)."""
    return quote(str(value), safe="")


def _path_id(request: Request | WebSocket, name: str, what: str) -> str:
    """The id in the path, decoded: exactly the id the link was built from, or 400."""
    try:
        return check_name(request.path_params[name], what)
    except InvalidArgument as exc:
        raise Refused(400, str(exc)) from None


async def _texts(ws: WebSocket) -> AsyncIterator[str]:
    """A socket's text messages until it closes, from either end.

    The person closing their tab is found by a read (a disconnect) or first by a frame
    that could not be sent, which marks the socket closed: reading it then would raise
    (a traceback on every such close), so the loop ends there too.
    """
    with contextlib.suppress(WebSocketDisconnect):
        while ws.application_state is WebSocketState.CONNECTED:
            yield await ws.receive_text()
