"""Authorisation: may this conversation use the browser's login to this site, now?

Pure and synchronous (no browser, no store, no awaits): it reads the login ledger,
the grants and the spent-use tokens (:mod:`session_keeper._model.uses`) and answers with a
:class:`~session_keeper.facts.Decision`. One evaluation, :meth:`Authorisation.evaluate`,
takes a :class:`Query` whose options say how the answer counts:

=================  =========  ===========  =========
keeper method      ``counts``  ``request``  ``dry_run``
=================  =========  ===========  =========
``decide``         yes        no           no          spends a use, arms one request
``permits``        no         no           no          spends nothing, logs nothing
``admit``          yes        yes          no          one request; spends, or uses an armed act
``admit(dry_run)`` yes        yes          yes         what ``admit`` would answer
=================  =========  ===========  =========

The caller (the keeper) saves and audits: :class:`Evaluation` says whether a grant's
``uses_left`` changed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from datetime import datetime
from typing import Any, Literal

import attrs

from session_keeper._model.cookies import normalize_site
from session_keeper._model.facts import Decision
from session_keeper._model.grants import GrantBook, check_name
from session_keeper._model.ledger import LoginLedger
from session_keeper._model.uses import Requester, UseTokens
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import InvalidArgumentType

log = scrubbing_logger("session_keeper")

#: What ``decide()`` answers when a plan assumed a login that a restart took:
#: ``"stop"`` (ask a human; the safe default) or ``"relogin"`` (``need_login``: the
#: step may be retried after a fresh sign-in).
RestartPolicy = Literal["stop", "relogin"]

STOP_REASON = "plan assumed a login that no longer exists. Ask a human to sign in again."


@attrs.frozen(kw_only=True)
class Query:
    """One permission question and how its answer counts (see the module's table)."""

    conversation: str
    site: str
    action: str
    #: The plan assumed a login: a lost one answers ``stop`` (or ``need_login``).
    assumes_login: bool = False
    #: The answer counts against a counted grant's ``uses`` (``False``: a pure look).
    counts: bool = False
    #: The answer admits one request leaving the browser (armed acts, page loads).
    request: bool = False
    #: Answer as if counting, but spend and consume nothing.
    dry_run: bool = False
    #: The page load a request belongs to (see :mod:`session_keeper._model.uses`).
    page_load: Hashable | None = None
    #: ``decide``: the page (``None``: the main tab) and URL the armed act admits;
    #: ``admit``: the page and URL of the request.
    requester: Requester = attrs.field(factory=Requester)


@attrs.frozen(kw_only=True)
class BrowserView:
    """What authorisation needs to know of the browser and the conversation's news."""

    alive: bool
    #: ``None`` before the first launch.
    generation: int | None
    #: The browser restarted since the conversation's last ``ensure()``.
    restarted_unheard: bool


@attrs.frozen(kw_only=True)
class Evaluation:
    """A decision, and whether it changed a grant's remaining uses (to be saved)."""

    decision: Decision
    grants_changed: bool = False


class Authorisation:
    """Grants + the login ledger + spent-use tokens → a :class:`Decision`."""

    def __init__(
        self,
        grants: GrantBook,
        ledger: LoginLedger,
        uses: UseTokens,
        restart_policy: Mapping[str, RestartPolicy],
    ) -> None:
        self._grants = grants
        self._ledger = ledger
        self._uses = uses
        self._restart_policy = dict(restart_policy)

    def restart_policy(self, action: str) -> RestartPolicy:
        """What ``action`` does after its login was lost: ``"stop"`` or ``"relogin"``."""
        return self._restart_policy.get(action, "stop")

    def holds_grant(self, conversation: str, site: str, action: str, now: datetime) -> bool:
        """Whether ``conversation`` holds a live grant for ``action`` on ``site`` (no use spent)."""
        conversation = check_name(conversation, "conversation")
        site = normalize_site(check_name(site, "site"))
        action = self._grants.check_action(action)
        return self._grants.find(conversation, site, action, now) is not None

    def evaluate(self, query: Query, browser: BrowserView, now: datetime) -> Evaluation:
        """Answer ``query``; raises ``InvalidArgument``/``InvalidArgumentType`` for bad input."""
        conversation = check_name(query.conversation, "conversation")
        site = normalize_site(check_name(query.site, "site"))
        action = self._grants.check_action(query.action)
        if not isinstance(query.assumes_login, bool):
            raise InvalidArgumentType("assumes_login must be a bool")
        for name in ("counts", "request", "dry_run"):
            if not isinstance(getattr(query, name), bool):
                raise InvalidArgumentType(f"{name} must be a bool")

        def answer(
            outcome: Any, reason: str | None, owner: str | None = None, **kw: Any
        ) -> Evaluation:
            d = Decision(
                outcome=outcome,
                conversation=conversation,
                site=site,
                action=action,
                reason=reason,
                login_owner=owner,
                generation=browser.generation,
                **kw,
            )
            if outcome != "act" and query.counts:
                log.info(
                    "decision %s",
                    outcome,
                    extra=log_extra(conversation=conversation, site=site, action=action),
                )
            return Evaluation(decision=d, grants_changed=changed)

        changed = False
        if browser.restarted_unheard:
            return answer(
                "stop",
                f"the browser restarted since {conversation}'s last ensure(); call ensure() first",
            )
        if not browser.alive:
            # A dead or idle-expired browser holds no login anyone may rely on.
            return answer("stop", "the browser is gone; call ensure() to learn what was lost")
        record = self._ledger.get(site)
        if record is None:
            return self._no_login(query, site, action, answer)
        key = (conversation, site, action)
        if query.request and query.counts:
            if self._uses.in_page_load(query.page_load, key, now):
                # A request of a page whose load already spent its use.
                return answer(
                    "act", None, record.owner, needs_revalidation=record.needs_revalidation
                )
            armed, expiry = self._uses.take_armed(
                key, now, consume=not query.dry_run, who=query.requester
            )
            if armed:
                # decide() already spent a use on this act: it admits this request.
                if not query.dry_run and query.page_load is not None:
                    self._uses.open_page_load(query.page_load, key, expiry)
                return answer(
                    "act",
                    None,
                    record.owner,
                    needs_revalidation=record.needs_revalidation,
                    spent_use=True,
                )
        grant = self._grants.find(conversation, site, action, now)
        if grant is None:
            if self._grants.for_conversation(conversation, site, now):
                reason = (
                    f"{conversation}'s grant for {site} does not cover {action} "
                    f"(login belongs to {record.owner})"
                )
            else:
                reason = f"{conversation} has no grant for {site} (login belongs to {record.owner})"
            return answer("block", reason, record.owner)
        counted = query.counts and grant.uses_left is not None
        if counted and not query.dry_run:
            self._grants.spend(grant)
            changed = True
            if not query.request:
                self._uses.arm(
                    key,
                    grant.grant.expires_at,
                    page=query.requester.page,
                    url=query.requester.url,
                )
            elif query.page_load is not None:
                self._uses.open_page_load(query.page_load, key, grant.grant.expires_at)
        return answer(
            "act",
            None,
            record.owner,
            needs_revalidation=record.needs_revalidation,
            spent_use=counted,
        )

    def _no_login(self, query: Query, site: str, action: str, answer: Any) -> Evaluation:
        """Nobody is signed in to ``site``: ``need_login`` (``stop`` when the plan assumed one)."""
        lost = self._ledger.lost(site)
        if lost is not None and query.assumes_login:
            if self._restart_policy[action] == "stop":
                result: Evaluation = answer("stop", STOP_REASON, lost.owner)
                return result
            took = (
                f"{site} signed the login out"
                if lost.cause == "signed_out"
                else f"the restart of browser-{lost.generation} took the login to {site}"
            )
            result = answer("need_login", f"{took}; sign in again, then retry", lost.owner)
            return result
        if lost is not None and lost.cause == "signed_out":
            reason = f"{site} signed {lost.owner}'s login out; sign in again"
            result = answer("need_login", reason, lost.owner)
            return result
        result = answer("need_login", f"not logged in to {site}", lost.owner if lost else None)
        return result
