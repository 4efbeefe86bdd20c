"""Borrow requests: a conversation asks a person for one use of another's login.

An agent that meets ``block`` cannot approve itself: it files a request, and the
login's owner (its own MCP client), a person (the console) or the application answers
it, never the requesting conversation. Approving
creates a counted :class:`~session_keeper.Grant`; the request records who decided,
when, and what was given. Pending requests expire, so a question nobody answered
never turns into a permission later.

The book is pure state (no I/O); the keeper saves it with its document and writes
every request and answer to the audit chain.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

import attrs

from session_keeper._model.changes import Changes
from session_keeper.errors import InvalidArgument, InvalidArgumentType, TooManyPendingRequests

BorrowStatus = Literal["pending", "approved", "denied", "expired"]

#: Who answered a request: the login's ``owner`` conversation (its own MCP client), a
#: ``person`` (the console) or the ``application`` (its own code, e.g. a chat UI).
ApproverKind = Literal["owner", "person", "application"]

#: How long a request waits for an answer unless the caller says otherwise.
DEFAULT_REQUEST_TTL = timedelta(hours=1)

#: How many answered requests the book keeps (newest first) for the record; the audit
#: chain keeps all of them, the saved document stays bounded.
ANSWERED_KEPT = 100

#: Longest free-text reason kept (the agent writes it; a person reads it).
MAX_REASON = 500

#: How many requests one conversation may have pending at once: an agent in a loop
#: must not bury the person who answers under questions.
MAX_PENDING_PER_CONVERSATION = 5


@attrs.frozen(kw_only=True)
class BorrowRequest:
    """One request for a borrow, and its answer once there is one."""

    #: ``borrow-<random>``; what a person approves or denies.
    id: str
    conversation: str
    site: str
    action: str
    #: Why the agent asks, in its own words (shown to the person; never a secret).
    reason: str | None
    requested_at: datetime
    #: A pending request is void after this.
    expires_at: datetime
    status: BorrowStatus = "pending"
    decided_by: str | None = None
    #: Which kind of approver ``decided_by`` names (``None`` until answered, and for
    #: requests answered before the kind was recorded).
    decided_as: ApproverKind | None = None
    decided_at: datetime | None = None
    #: For an approval: how many uses were given and until when.
    uses: int | None = None
    grant_expires_at: datetime | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON form (instants in UTC, ISO 8601)."""
        d: dict[str, object] = {
            "id": self.id,
            "conversation": self.conversation,
            "site": self.site,
            "action": self.action,
            "reason": self.reason,
            "requested_at": _iso(self.requested_at),
            "expires_at": _iso(self.expires_at),
            "status": self.status,
            "decided_by": self.decided_by,
            "decided_at": _iso(self.decided_at),
            "uses": self.uses,
            "grant_expires_at": _iso(self.grant_expires_at),
        }
        # Only when known: a document saved before the kind was recorded reads back as is.
        if self.decided_as is not None:
            d["decided_as"] = self.decided_as
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BorrowRequest:
        """Read :meth:`to_dict`'s form back; a malformed one raises ``InvalidArgument``."""
        try:
            status = d["status"]
            if status not in get_args(BorrowStatus):
                raise ValueError(f"unknown status {status!r}")
            # Absent in documents saved before the kind was recorded.
            decided_as = d.get("decided_as")
            if decided_as is not None and decided_as not in get_args(ApproverKind):
                raise ValueError(f"unknown approver kind {decided_as!r}")
            return cls(
                id=str(d["id"]),
                conversation=str(d["conversation"]),
                site=str(d["site"]),
                action=str(d["action"]),
                reason=None if d["reason"] is None else str(d["reason"]),
                requested_at=_parse(d["requested_at"]),
                expires_at=_parse(d["expires_at"]),
                status=status,
                decided_by=None if d["decided_by"] is None else str(d["decided_by"]),
                decided_as=decided_as,
                decided_at=_opt_parse(d["decided_at"]),
                uses=None if d["uses"] is None else int(d["uses"]),
                grant_expires_at=_opt_parse(d["grant_expires_at"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"malformed borrow request: {exc}") from None


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _parse(value: Any) -> datetime:
    when = datetime.fromisoformat(value)
    if when.tzinfo is None:
        raise ValueError("instant without a timezone")
    return when.astimezone(UTC)


def _opt_parse(value: Any) -> datetime | None:
    return None if value is None else _parse(value)


def check_reason(reason: object) -> str | None:
    """A reason is optional free text, bounded, without control characters."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise InvalidArgumentType("reason must be a str or None")
    if any(ord(ch) < 32 and ch not in "\t\n" for ch in reason) or "\x7f" in reason:
        raise InvalidArgument("reason must not contain control characters")
    return reason[:MAX_REASON]


class BorrowBook:
    """Pending and recently answered borrow requests, keyed by id."""

    def __init__(self) -> None:
        # Every request by id, in filing order.
        self._requests: dict[str, BorrowRequest] = {}
        # conversation -> the ids of its pending requests (filing order): asking costs
        # what that conversation asked, not what every conversation did.
        self._pending: dict[str, dict[str, None]] = {}
        # The ids of answered (or expired) requests: the ones trimming may drop.
        self._answered: dict[str, None] = {}
        #: The ids of requests filed, answered or dropped since the last save took them.
        self.changes: Changes[str] = Changes()

    def _put(self, request: BorrowRequest) -> None:
        self._requests[request.id] = request
        self.changes.add(request.id)
        mine = self._pending.setdefault(request.conversation, {})
        if request.status == "pending":
            mine[request.id] = None
            return
        mine.pop(request.id, None)
        if not mine:
            del self._pending[request.conversation]
        self._answered[request.id] = None

    def _drop(self, request_id: str) -> None:
        request = self._requests.pop(request_id)
        self.changes.add(request_id)
        self._answered.pop(request_id, None)
        mine = self._pending.get(request.conversation)
        if mine is not None:
            mine.pop(request_id, None)
            if not mine:
                del self._pending[request.conversation]

    def file(
        self,
        conversation: str,
        site: str,
        action: str,
        reason: str | None,
        now: datetime,
        ttl: timedelta,
    ) -> tuple[BorrowRequest, bool]:
        """File a request; an identical pending one is returned instead (``False``).

        Idempotent because frameworks and MCP clients retry tool calls: a retried ask
        must not put two questions in front of a person. A conversation with
        :data:`MAX_PENDING_PER_CONVERSATION` other requests pending is refused
        (:class:`TooManyPendingRequests`) and nothing is filed.
        """
        pending = 0
        for request_id in self._pending.get(conversation, ()):
            r = self._requests[request_id]
            if r.expires_at <= now:
                continue
            if (r.site, r.action) == (site, action):
                return r, False
            pending += 1
        if pending >= MAX_PENDING_PER_CONVERSATION:
            raise TooManyPendingRequests(
                f"conversation {conversation!r} already has {pending} borrow requests pending; "
                "wait for an answer (or for them to expire) before asking again"
            )
        request = BorrowRequest(
            id=f"borrow-{secrets.token_hex(6)}",
            conversation=conversation,
            site=site,
            action=action,
            reason=reason,
            requested_at=now,
            expires_at=now + ttl,
        )
        self._put(request)
        return request, True

    def get(self, request_id: str) -> BorrowRequest | None:
        """The request with this id, pending or answered."""
        return self._requests.get(request_id)

    def answer(
        self,
        request_id: str,
        *,
        status: Literal["approved", "denied"],
        by: str,
        kind: ApproverKind,
        now: datetime,
        uses: int | None = None,
        grant_expires_at: datetime | None = None,
    ) -> BorrowRequest:
        """Record an answer; only a pending, unexpired request can be answered."""
        request = self._requests.get(request_id)
        if request is None:
            raise InvalidArgument(f"no borrow request {request_id!r}")
        if request.status != "pending":
            raise InvalidArgument(f"borrow request {request_id} was already {request.status}")
        if request.expires_at <= now:
            self._put(attrs.evolve(request, status="expired"))
            raise InvalidArgument(f"borrow request {request_id} expired unanswered")
        answered = attrs.evolve(
            request,
            status=status,
            decided_by=by,
            decided_as=kind,
            decided_at=now,
            uses=uses,
            grant_expires_at=grant_expires_at,
        )
        self._put(answered)
        self._trim()
        return answered

    def expire(self, now: datetime) -> tuple[BorrowRequest, ...]:
        """Mark pending requests past their expiry; return them."""
        gone = tuple(
            r
            for ids in self._pending.values()
            for r in (self._requests[i] for i in ids)
            if r.expires_at <= now
        )
        for r in gone:
            self._put(attrs.evolve(r, status="expired"))
        if gone:
            self._trim()
        return gone

    def forget(self, conversation: str) -> None:
        """A forgotten conversation asks nothing any more."""
        mine = [*self._pending.get(conversation, ())]
        mine += [i for i in self._answered if self._requests[i].conversation == conversation]
        for request_id in mine:
            self._drop(request_id)

    def requests(self, *, status: BorrowStatus | None = None) -> tuple[BorrowRequest, ...]:
        """Requests in the order they were filed, optionally of one status."""
        # The dict keeps filing order (and a saved book is loaded in that order).
        return tuple(r for r in self._requests.values() if status is None or r.status == status)

    def load(self, saved: Iterable[BorrowRequest]) -> None:
        """Replace the book with a saved one."""
        self.changes.update(self._requests)
        self._requests, self._pending, self._answered = {}, {}, {}
        for r in saved:
            self._put(r)

    def _trim(self) -> None:
        if len(self._answered) <= ANSWERED_KEPT:
            return
        answered = sorted(
            (self._requests[i] for i in self._answered),
            key=lambda r: r.decided_at or r.expires_at,
            reverse=True,
        )
        for r in answered[ANSWERED_KEPT:]:
            self._drop(r.id)
