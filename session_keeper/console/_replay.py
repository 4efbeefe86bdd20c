"""The console's replay pages: a conversation's frames beside its audit entries and
refusals, and one frame shown inertly.

A frame's DOM is served on its own URL with a CSP that allows no script, no connection
and no image but ``data:``, and ``sandbox`` (an opaque origin, no forms, no popups); the
frame page shows it in a sandboxed ``<iframe>``. The DOM was masked and stripped in the
recorded page (see :class:`~session_keeper.Replay`): the console only shows it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from session_keeper._keeper.guard_link.block_log import BLOCK_EVENT
from session_keeper._keeper.tabs.replay import ReplayFrame, ReplayRecorder
from session_keeper._model.events import AUDIT_ENTRY_KIND
from session_keeper._model.grants import check_name
from session_keeper._util.redact import redact_text
from session_keeper.console._auth import Session
from session_keeper.console._http import Refused
from session_keeper.console._views import Row, when
from session_keeper.errors import InvalidArgument
from session_keeper.stores import Store

__all__ = ["FRAME_CSP", "FRAME_PAGE_CSP", "ReplayPages", "frame_row", "inert", "timeline"]

#: A recorded DOM: styles inline, images ``data:`` only, nothing else; sandboxed.
FRAME_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
    "form-action 'none'; base-uri 'none'; frame-ancestors 'self'; sandbox"
)
#: The page that frames it: the console's own rules, plus a frame from the console.
FRAME_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
#: A recorded link is shown, not followed: a click would leave for the original site.
_NO_FOLLOW = "<style>a, area { pointer-events: none; cursor: default; }</style>"
#: The most audit and event entries a timeline reads.
_EVENTS = 2000


def inert(dom: str) -> str:
    """A recorded DOM as the console serves it: its links cannot be followed."""
    head = dom.find("<head>")
    if head < 0:
        return _NO_FOLLOW + dom
    return dom[: head + 6] + _NO_FOLLOW + dom[head + 6 :]


def frame_row(frame: ReplayFrame) -> Row:
    """One frame as text."""
    return {
        "at": when(frame.at),
        "seq": frame.seq,
        "what": f"frame: {frame.act}" + (" (popup)" if frame.popup else ""),
        "by": frame.by or "agent",
        "detail": f"{frame.title} — {frame.url}" if frame.title else frame.url,
        "generation": frame.generation,
    }


def _plain(value: object) -> object:
    """Stored event data (frozen mappings inside) as plain JSON values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _mentions(data: Mapping[str, Any], conversation: str) -> bool:
    """Whether an audit entry or block names ``conversation`` (as actor or login owner)."""
    body = data.get("body")
    fields = body if isinstance(body, Mapping) else data
    return conversation in (fields.get("conversation"), fields.get("owner"))


async def timeline(
    recorder: ReplayRecorder | None, store: Store | None, conversation: str
) -> list[Row]:
    """The conversation's frames, audit entries and Guard refusals, oldest first."""
    rows: list[tuple[str, int, Row]] = []
    if recorder is not None:
        for frame in await recorder.frames(conversation):
            rows.append((frame.at.isoformat(), 1, {**frame_row(frame), "kind": "frame"}))
    if store is not None:
        for kind in (AUDIT_ENTRY_KIND, BLOCK_EVENT):
            for event in await store.events(kind=kind, limit=_EVENTS, newest_first=True):
                data = event.data
                if not _mentions(data, conversation):
                    continue
                entry = str(data.get("type") or kind) if kind == AUDIT_ENTRY_KIND else kind
                body = data.get("body") if kind == AUDIT_ENTRY_KIND else data
                text = json.dumps(_plain(body), default=str, sort_keys=True)
                refusal = entry == BLOCK_EVENT
                row: Row = {
                    "at": when(event.at),
                    "seq": "",
                    "what": f"refused by the Guard ({entry})" if refusal else f"audit: {entry}",
                    "by": "",
                    "detail": redact_text(text, limit=300),
                    "generation": "" if event.generation is None else event.generation,
                    "kind": "refusal" if refusal else "audit",
                }
                rows.append((event.at.isoformat(), 0, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r for _, _, r in rows]


#: The console's session check: a request's session and its cookie's id (or raises Refused).
SessionOf = Callable[[Request], tuple[Session, str | None]]
#: The console's page renderer: ``(request, template, session, sid, **context)``.
Render = Callable[..., Awaitable[Response]]


class ReplayPages:
    """The three replay routes, over the console's session check and page renderer."""

    def __init__(
        self,
        *,
        session: SessionOf,
        render: Render,
        recorder: Callable[[], ReplayRecorder | None],
        store: Store | None,
    ) -> None:
        self._session_of = session
        self._render = render
        self._recorder = recorder
        self._store = store

    def _open(self, request: Request) -> tuple[Session, str | None, str]:
        session, sid = self._session_of(request)
        if session.only_live is not None:
            raise Refused(403, "a sign-in link opens only its live view, not a replay")
        try:
            conversation = check_name(request.path_params["conversation"], "conversation")
        except InvalidArgument as exc:
            raise Refused(400, str(exc)) from None
        return session, sid, conversation

    async def timeline(self, request: Request) -> Response:
        """``/replay/<conversation>``: its frames beside its audit entries and refusals."""
        session, sid, conversation = self._open(request)
        recorder = self._recorder()
        return await self._render(
            request,
            "replay.html",
            session,
            sid,
            section="conversations",
            conversation=conversation,
            quoted=quote(conversation, safe=""),
            rows=await timeline(recorder, self._store, conversation),
            recording=recorder is not None,
        )

    async def frame(self, request: Request) -> Response:
        """``/replay/<conversation>/frames/<n>``: one frame, framed inertly."""
        session, sid, conversation = self._open(request)
        seq = int(request.path_params["seq"])
        recorder = self._recorder()
        frames = await recorder.frames(conversation) if recorder is not None else ()
        shown = next((f for f in frames if f.seq == seq), None)
        if shown is None:
            raise Refused(404, "no such frame (it may have aged out)")
        response = await self._render(
            request,
            "replay_frame.html",
            session,
            sid,
            section="conversations",
            conversation=conversation,
            quoted=quote(conversation, safe=""),
            frame=frame_row(shown),
            previous=max((f.seq for f in frames if f.seq < seq), default=None),
            following=min((f.seq for f in frames if f.seq > seq), default=None),
        )
        response.headers["content-security-policy"] = FRAME_PAGE_CSP
        return response

    async def dom(self, request: Request) -> Response:
        """``/replay/<conversation>/frames/<n>/dom``: the recorded DOM, under FRAME_CSP."""
        _, _, conversation = self._open(request)
        recorder = self._recorder()
        found = None
        if recorder is not None:
            found = await recorder.dom(conversation, int(request.path_params["seq"]))
        if found is None:
            raise Refused(404, "no such frame (it may have aged out)")
        return HTMLResponse(
            inert(found),
            headers={"content-security-policy": FRAME_CSP, "x-frame-options": "SAMEORIGIN"},
        )
