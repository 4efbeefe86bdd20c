"""The keeper's permissions, as its facade offers them: one query in three modes (decide,
permits, admit), grants and revokes, borrow requests and their answers, human takeovers.

Part of :class:`~session_keeper.SessionKeeper` (its base class): the methods live here so
that each half of the facade stays readable; the state they change belongs to the
keeper's parts (the grant desk, the authorisation, the live state).
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic

from session_keeper._browser.backend import PageT
from session_keeper._keeper.permissions.granting import GrantDesk
from session_keeper._keeper.saving.persistence import KeeperPersistence
from session_keeper._keeper.state.live import KeeperLive
from session_keeper._model.authorisation import Authorisation, BrowserView, Query, RestartPolicy
from session_keeper._model.borrows import (
    DEFAULT_REQUEST_TTL,
    ApproverKind,
    BorrowRequest,
    BorrowStatus,
)
from session_keeper._model.facts import (
    Decision,
)
from session_keeper._model.grants import Grant, check_name
from session_keeper._model.uses import Requester, arm_target, without_fragment
from session_keeper._util.clock import Clock
from session_keeper.errors import InvalidArgument, InvalidArgumentType

if TYPE_CHECKING:
    pass


__all__ = ["KeeperPermissions"]


class KeeperPermissions(Generic[PageT]):
    """The permission half of :class:`~session_keeper.SessionKeeper` (see the module)."""

    _clock: Clock
    _live: KeeperLive[PageT]
    _persist: KeeperPersistence[PageT]
    _authorisation: Authorisation
    _desk: GrantDesk[PageT]

    # -- authorisation: one query, three modes ------------------------------------

    def _page_of(self, conversation: str, page: Any) -> Any:
        """The raw page of a :class:`ConversationTab` of ``conversation`` (a raw page as is)."""
        from session_keeper._keeper.tabs.conversation_tab import ConversationTab, raw_page

        if isinstance(page, ConversationTab):
            if page.conversation != conversation:
                raise InvalidArgument(
                    f"that tab belongs to {page.conversation}, not {conversation}"
                )
            return raw_page(page)
        return page

    def decide(
        self,
        conversation: str,
        site: str,
        action: str = "read",
        *,
        assumes_login: bool = False,
        page: object = None,
        url: str | None = None,
    ) -> Decision:
        """May ``conversation`` do ``action`` on ``site`` with the browser's login, now?

        - ``act``: a login is present and a live grant covers it (one use is spent).
          The use is armed for the request that acts on it: it admits the next such
          request from ``page`` (a :class:`ConversationTab` or page of this
          conversation; default its main tab), and only for ``url`` when given — a
          background request of another page cannot spend it. Raises
          :class:`InvalidArgument` for a tab of another conversation.
        - ``block``: a login is present but this conversation holds no grant for
          the action; the reason names the login's owner.
        - ``stop``: the plan assumed a login that a restart took away (or the
          browser restarted since this conversation's last ``ensure()``) — ask a
          human. With restart policy ``"relogin"`` for the action, a lost login
          gives ``need_login`` instead.
        - ``need_login``: nobody is signed in to the site.
        """
        with self._live.instruments.span("session_keeper.decide") as span:
            decision = self._decide(conversation, site, action, assumes_login, page, url)
            if span.is_recording():
                span.set_attributes(
                    {
                        "session_keeper.conversation": decision.conversation,
                        "server.address": decision.site,
                        "session_keeper.action": decision.action,
                        "session_keeper.decision": decision.outcome,
                        "session_keeper.assumes_login": assumes_login,
                    }
                )
            return decision

    def _decide(
        self,
        conversation: str,
        site: str,
        action: str,
        assumes_login: bool,
        page: object,
        url: str | None,
    ) -> Decision:
        armed_page, armed_url = arm_target(self._page_of(conversation, page), url)
        decision = self._evaluate(
            Query(
                conversation=conversation,
                site=site,
                action=action,
                assumes_login=assumes_login,
                counts=True,
                requester=Requester(page=armed_page, url=armed_url),
            )
        )
        self._persist.audit_soon(
            "decision",
            {
                "conversation": decision.conversation,
                "site": decision.site,
                "action": decision.action,
                "outcome": decision.outcome,
                "reason": decision.reason,
            },
        )
        return decision

    def restart_policy(self, action: str) -> RestartPolicy:
        """What ``action`` may do after its login was lost: ``"stop"`` (ask a human) or
        ``"relogin"`` (retry after a fresh login, which a sign-in recipe may make)."""
        return self._authorisation.restart_policy(check_name(action, "action"))

    def permits(self, conversation: str, site: str, action: str = "read") -> Decision:
        """What :meth:`decide` would answer, without spending a use or logging.

        For enforcement layers (the network Guard) that ask on every request.
        """
        return self._evaluate(Query(conversation=conversation, site=site, action=action))

    def admit(
        self,
        conversation: str,
        site: str,
        action: str = "write",
        *,
        dry_run: bool = False,
        page_load: Hashable | None = None,
        page: Hashable | None = None,
        url: str | None = None,
    ) -> Decision:
        """May one request of ``conversation`` for ``action`` leave the browser to ``site``?

        For enforcement layers that see each request (the network Guard asks this for
        every request to a signed-in site, reads and writes alike). Unlike
        :meth:`permits` it counts, exactly as :meth:`decide` does: a grant with
        ``uses`` admits at most that many uses. A use that :meth:`decide` spent on an
        ``act`` admits the next such request of this conversation to this site from
        the page (and for the URL) it was armed for; ``page`` and ``url`` say where
        this request comes from (``page=None``: the caller cannot tell). Without an
        armed act, this spends a use itself.

        ``page_load`` names one page load (the Guard gives each top-level navigation
        of a page its own token, and passes it for reads): a use spent under it also
        admits this conversation's further requests for ``action`` to ``site`` under
        the same token — the subresources of that page — until :meth:`end_page_load`,
        a revoke, the grant's expiry or a restart. Without it one use is one request.
        Unlimited grants spend nothing. ``dry_run`` answers the same without spending
        anything (``spent_use`` then says whether it would). Raises
        :class:`InvalidArgument` for an unknown action.
        """
        if not isinstance(dry_run, bool):
            raise InvalidArgumentType("dry_run must be a bool")
        decision = self._evaluate(
            Query(
                conversation=conversation,
                site=site,
                action=action,
                counts=True,
                request=True,
                dry_run=dry_run,
                page_load=page_load,
                requester=Requester(
                    page=page,
                    main_tab=page is not None and self._live.is_main_page(conversation, page),
                    url=None if url is None else without_fragment(url),
                ),
            )
        )
        if decision.outcome == "act" and decision.spent_use and not dry_run:
            self._persist.audit_soon(
                "request_admitted",
                {
                    "conversation": decision.conversation,
                    "site": decision.site,
                    "action": decision.action,
                },
            )
        return decision

    def end_page_load(self, page_load: Hashable) -> None:
        """The page of ``page_load`` navigated again or closed: its use admits nothing more."""
        self._live.uses.end_page_load(page_load)

    def _evaluate(self, query: Query) -> Decision:
        """The one permission query; ``decide``/``permits``/``admit`` are its modes."""
        self._live.check_open()
        conversation = check_name(query.conversation, "conversation")
        view = BrowserView(
            alive=self._live.alive,
            generation=self._live.generation or None,
            restarted_unheard=self._live.restart_unheard(conversation),
        )
        result = self._authorisation.evaluate(query, view, self._clock.now())
        if result.grants_changed:
            self._persist.save_soon()
        return result.decision

    # -- grants -----------------------------------------------------------------------

    def grant(self, grant: Grant) -> Grant:
        """Add a grant. An action the keeper does not know raises :class:`InvalidArgument`."""
        return self._desk.grant(grant)

    def revoke(self, conversation: str, site: str) -> tuple[Grant, ...]:
        """Remove every grant of ``conversation`` on ``site``; return them."""
        return self._desk.revoke(conversation, site)

    def approve_borrow(
        self,
        conversation: str,
        site: str,
        action: str,
        approved_by: str,
        *,
        expires_in: timedelta | None = None,
    ) -> Grant:
        """A human lets ``conversation`` use ``site``'s login once, for ``action``."""
        return self._desk.approve_borrow(
            conversation, site, action, approved_by, expires_in=expires_in
        )

    def request_borrow(
        self,
        conversation: str,
        site: str,
        action: str = "read",
        *,
        reason: str | None = None,
        expires_in: timedelta = DEFAULT_REQUEST_TTL,
    ) -> BorrowRequest:
        """``conversation`` asks a person for a borrow of ``site``'s login for ``action``.

        Returns the pending :class:`BorrowRequest` (an identical pending one when the
        ask is repeated, as retried tool calls do). A person answers it with
        :meth:`answer_borrow`; unanswered, it expires after ``expires_in`` and grants
        nothing. Saved by the keeper's write owner and audited like any grant.
        Raises :class:`InvalidArgument` / :class:`InvalidArgumentType` for bad input, and
        :class:`~session_keeper.errors.TooManyPendingRequests` when ``conversation``
        already has five other requests pending (nothing is filed then).
        """
        return self._desk.request_borrow(
            conversation, site, action, reason=reason, expires_in=expires_in
        )

    def borrow_requests(
        self, *, status: BorrowStatus | None = "pending"
    ) -> tuple[BorrowRequest, ...]:
        """Borrow requests in the order they were filed (pending ones by default).

        ``status=None`` lists answered and expired ones too (the most recent are kept).
        """
        return self._desk.borrow_requests(status=status)

    def answer_borrow(
        self,
        request_id: str,
        *,
        approve: bool,
        by: str,
        approver: ApproverKind = "application",
        uses: int | None = 1,
        expires_in: timedelta | None = None,
    ) -> BorrowRequest:
        """The login's owner, a person or the application answers a pending borrow request.

        Approving adds a grant for the request's conversation, site and action with
        ``uses`` uses (``None``: unlimited) until ``expires_in`` from now (``None``: no
        expiry); ``by`` names the approver in the grant and the audit chain, and
        ``approver`` says which kind it is (``"owner"``: ``by`` is the conversation that
        owns the site's login; ``"person"``: someone at the console; ``"application"``:
        the application's own code). Denying grants nothing. The requesting conversation
        never answers its own request: ``by`` equal to it raises
        :class:`~session_keeper.errors.SelfApprovalRefused`. Raises
        :class:`InvalidArgument` for an unknown, answered or expired request, an
        ``"owner"`` who does not own the login, and bad ``uses``/``expires_in``; nothing
        changes then.
        """
        return self._desk.answer_borrow(
            request_id,
            approve=approve,
            by=by,
            approver=approver,
            uses=uses,
            expires_in=expires_in,
        )

    # -- human takeover ---------------------------------------------------------------

    def begin_takeover(
        self, conversation: str, *, expires_in: timedelta, by: str | None = None
    ) -> datetime:
        """A person drives the browser for ``conversation``: it is not swept until this expires.

        Written to the audit chain (``takeover_begun``, naming ``by``).
        """
        return self._desk.begin_takeover(conversation, expires_in=expires_in, by=by)

    def end_takeover(self, conversation: str, *, by: str | None = None) -> None:
        """The person handed control back (audited as ``takeover_ended``)."""
        self._desk.end_takeover(conversation, by=by)
