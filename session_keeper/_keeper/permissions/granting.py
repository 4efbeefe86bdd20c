"""Granting: who may use which login — grants, revokes, borrow requests, takeovers.

The changes a person or the application makes to permissions. Each is synchronous:
it changes the live state, counts the change for the keeper's write owner
(``KeeperPersistence.save_soon``) and queues its audit entry, in that order. What a
grant *answers* is :mod:`session_keeper._model.authorisation`'s business.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Generic, get_args

from session_keeper._browser.backend import PageT
from session_keeper._model.borrows import (
    DEFAULT_REQUEST_TTL,
    ApproverKind,
    BorrowRequest,
    BorrowStatus,
    check_reason,
)
from session_keeper._model.cookies import normalize_site
from session_keeper._model.grants import Grant, check_name
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger
from session_keeper._util.validate import check_duration
from session_keeper.errors import InvalidArgument, InvalidArgumentType, SelfApprovalRefused

if TYPE_CHECKING:
    from session_keeper._keeper.saving.persistence import KeeperPersistence
    from session_keeper._keeper.state.live import KeeperLive

log = scrubbing_logger("session_keeper")


class GrantDesk(Generic[PageT]):
    """Grants, revokes, borrow requests and human takeovers (see the module)."""

    def __init__(self, live: KeeperLive[PageT], persist: KeeperPersistence[PageT]) -> None:
        self._live = live
        self._persist = persist

    def grant(self, grant: Grant) -> Grant:
        """Add a grant. An action the keeper does not know raises :class:`InvalidArgument`."""
        self._live.check_open()
        added = self._live.grants.add(grant).grant
        self._persist.save_soon()
        self._persist.audit_soon("grant_added", grant_body(added))
        return added

    def revoke(self, conversation: str, site: str) -> tuple[Grant, ...]:
        """Remove every grant of ``conversation`` on ``site``; return them."""
        self._live.check_open()
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        gone = self._live.grants.revoke(conversation, site)
        self._live.uses.revoke(conversation, site)  # nothing more, armed or loading
        self._persist.save_soon()
        if gone:
            self._persist.audit_soon("grants_revoked", {"grants": [grant_body(g) for g in gone]})
        return gone

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
        self._live.check_open()
        check_name(approved_by, "approved_by")
        action = self._live.grants.check_action(action)
        g = self._borrow_grant(conversation, site, action, approved_by, expires_in, uses=1)
        self._persist.audit_soon("borrow_approved", grant_body(g))
        return g

    def request_borrow(
        self,
        conversation: str,
        site: str,
        action: str = "read",
        *,
        reason: str | None = None,
        expires_in: timedelta = DEFAULT_REQUEST_TTL,
    ) -> BorrowRequest:
        """See :meth:`SessionKeeper.request_borrow` (the public contract)."""
        self._live.check_open()
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        action = self._live.grants.check_action(action)
        reason = check_reason(reason)
        now = self._live.clock.now()
        ttl = check_duration(expires_in, "expires_in", after=now)
        request, filed = self._live.borrows.file(conversation, site, action, reason, now, ttl)
        if filed:
            self._persist.save_soon()
            self._persist.audit_soon(
                "borrow_requested",
                {
                    "id": request.id,
                    "conversation": conversation,
                    "site": site,
                    "action": action,
                    "reason": reason,
                },
            )
            log.info(
                "borrow requested",
                extra=log_extra(conversation=conversation, site=site, action=action),
            )
        return request

    def borrow_requests(
        self, *, status: BorrowStatus | None = "pending"
    ) -> tuple[BorrowRequest, ...]:
        """See :meth:`SessionKeeper.borrow_requests` (the public contract)."""
        self._live.check_open()
        if status is not None and status not in ("pending", "approved", "denied", "expired"):
            raise InvalidArgument(f"unknown borrow request status {status!r}")
        now = self._live.clock.now()
        if any(r.expires_at <= now for r in self._live.borrows.requests(status="pending")):
            self._live.borrows.expire(now)
            self._persist.save_soon()
        return self._live.borrows.requests(status=status)

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
        """See :meth:`SessionKeeper.answer_borrow` (the public contract)."""
        self._live.check_open()
        if not isinstance(approve, bool):
            raise InvalidArgumentType("approve must be a bool")
        check_name(request_id, "request_id")
        check_name(by, "by")
        if not isinstance(approver, str):
            raise InvalidArgumentType("approver must be 'owner', 'person' or 'application'")
        if approver not in get_args(ApproverKind):
            raise InvalidArgument("approver must be 'owner', 'person' or 'application'")
        if uses is not None and (isinstance(uses, bool) or not isinstance(uses, int) or uses < 1):
            raise InvalidArgument("uses must be a positive int or None")
        now = self._live.clock.now()
        if expires_in is not None:
            check_duration(expires_in, "expires_in", after=now)
        request = self._live.borrows.get(request_id)
        if request is not None and request.status == "pending":
            self._check_approver(request, by, approver)
            if approve:
                self._live.grants.check_action(request.action)
        answered = self._live.borrows.answer(
            request_id,
            status="approved" if approve else "denied",
            by=by,
            kind=approver,
            now=now,
            uses=uses if approve else None,
            grant_expires_at=now + expires_in if approve and expires_in is not None else None,
        )
        if approve:
            g = self._borrow_grant(
                answered.conversation, answered.site, answered.action, by, expires_in, uses=uses
            )
            body = {**grant_body(g), "request": answered.id, "approver": approver}
            self._persist.audit_soon("borrow_approved", body)
        else:
            self._persist.save_soon()
            self._persist.audit_soon(
                "borrow_denied", {"request": answered.id, "by": by, "approver": approver}
            )
        return answered

    def _check_approver(self, request: BorrowRequest, by: str, approver: ApproverKind) -> None:
        # Whatever kind is claimed, the requester never answers its own question.
        if by == request.conversation:
            raise SelfApprovalRefused(
                f"borrow request {request.id} was filed by {by!r}: the login's owner, a person "
                "or the application must answer it"
            )
        if approver == "owner":
            logins = self._live.ledger.live()
            owner = next((r.owner for r in logins if r.site == request.site), None)
            if owner != by:
                raise InvalidArgument(
                    f"{by!r} does not own the {request.site} login, so cannot answer as its owner"
                )

    def _borrow_grant(
        self,
        conversation: str,
        site: str,
        action: str,
        approved_by: str,
        expires_in: timedelta | None,
        *,
        uses: int | None,
    ) -> Grant:
        now = self._live.clock.now()
        if expires_in is not None:
            check_duration(expires_in, "expires_in", after=now)
        g = Grant(
            conversation,
            site,
            actions={action},
            uses=uses,
            expires_at=now + expires_in if expires_in is not None else None,
            approved_by=approved_by,
        )
        self._live.grants.add(g)
        self._persist.save_soon()
        log.info(
            "borrow approved",
            extra=log_extra(conversation=g.conversation, site=g.site, action=action),
        )
        return g

    def begin_takeover(
        self, conversation: str, *, expires_in: timedelta, by: str | None = None
    ) -> datetime:
        """See :meth:`SessionKeeper.begin_takeover` (the public contract)."""
        self._live.check_open()
        conversation = check_name(conversation, "conversation")
        if by is not None:
            check_name(by, "by")
        until = self._live.clock.now() + check_duration(
            expires_in, "expires_in", after=self._live.clock.now()
        )
        self._live.conversations.set_takeover(conversation, until)
        self._persist.save_soon()
        self._persist.audit_soon(
            "takeover_begun", {"conversation": conversation, "by": by, "until": until.isoformat()}
        )
        return until

    def end_takeover(self, conversation: str, *, by: str | None = None) -> None:
        """The person handed control back (audited as ``takeover_ended``)."""
        conversation = check_name(conversation, "conversation")
        if by is not None:
            check_name(by, "by")
        if self._live.conversations.set_takeover(conversation, None):
            self._persist.save_soon()
            self._persist.audit_soon("takeover_ended", {"conversation": conversation, "by": by})


def grant_body(g: Grant) -> dict[str, object]:
    """A grant as an audit entry states it."""
    return {
        "conversation": g.conversation,
        "site": g.site,
        "actions": sorted(g.actions),
        "expires_at": g.expires_at.isoformat() if g.expires_at is not None else None,
        "uses": g.uses,
        "approved_by": g.approved_by,
    }
