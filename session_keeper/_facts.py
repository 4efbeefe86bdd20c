"""Facts the keeper hands across its boundary: frozen, keyword-only values."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import attrs

from session_keeper._grants import Grant

#: The conversation that owns the keeper's own probe pages: they ask "who is signed
#: in?" after a restart. The Guard lets it read signed-in sites and never write.
PROBE_CONVERSATION: Final = "session-keeper:probe"

#: What a turn can do with a login, as decided by :meth:`SessionKeeper.decide`.
Outcome = Literal["act", "block", "stop", "need_login"]

#: What was lost: a site's login, or a conversation's tab.
LostKind = Literal["login", "tab"]

#: Why it was lost. ``"gone"``: the browser no longer has it. ``"replaced"``: the
#: site's cookies are there but are not the ones recorded (another account or another
#: sign-in), so the recorded login is as good as lost. ``"idle"``: the sweep closed
#: an idle tab. ``"signed_out"``: the cookies are there but the site's login probe
#: says nobody is signed in (server-side expiry). ``"closed"``: a new keeper process
#: re-bound to the browser that lived on and found the tab's page no longer open.
LossCause = Literal["gone", "replaced", "idle", "signed_out", "closed"]

#: How a generation ended.
EndCause = Literal["closed", "crashed", "idle", "process_exit"]


@attrs.frozen(kw_only=True)
class Lost:
    """One thing a conversation had and no longer has.

    ``str()`` is ``login:<site>`` or ``tab:<conversation>``: the words a turn reports.
    """

    kind: LostKind
    #: The site (for a login) or the conversation (for a tab).
    name: str
    #: The conversation that owned the login or the tab.
    owner: str
    #: When the login was recorded, or when the tab's URL was last verified.
    when: datetime
    #: The tab's last verified URL (``None`` for a login).
    last_url: str | None = None
    #: The generation in which it existed.
    generation: int
    cause: LossCause = "gone"

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


@attrs.frozen(kw_only=True)
class TurnFacts:
    """What :meth:`SessionKeeper.ensure` says at the start of a turn.

    ``restarted`` is ``True`` exactly once for each conversation affected by a
    restart (it had a tab, owned a login, or held a grant on a login of the dead
    browser), on its first ``ensure()`` after it; ``lost`` then lists what it lost.
    """

    conversation: str
    #: The browser now in use, ``browser-<generation>``.
    browser_id: str
    generation: int
    restarted: bool
    lost: tuple[Lost, ...] = ()
    #: Sites whose login survived a restart (same cookies) but must be re-validated
    #: before it is trusted with a side effect.
    revalidate: tuple[str, ...] = ()
    #: Sites whose lost login was put back from the vault (policy allowed it). Still
    #: listed in ``lost`` — a restored login is a new fact, never a survival — and
    #: flagged for re-validation.
    restored: tuple[str, ...] = ()
    #: The generation this conversation last saw, when ``restarted``.
    previous_generation: int | None = None

    @property
    def lost_logins(self) -> tuple[Lost, ...]:
        """The logins in ``lost``."""
        return tuple(x for x in self.lost if x.kind == "login")

    @property
    def lost_tab(self) -> Lost | None:
        """This conversation's lost tab, if it lost one."""
        return next((x for x in self.lost if x.kind == "tab"), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (names, UTC instants, URLs without query); see :meth:`from_dict`."""
        from session_keeper._facts_codec import turn_facts_to_dict

        return turn_facts_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnFacts:
        """Read :meth:`to_dict`'s form back. Raises InvalidArgument / InvalidArgumentType."""
        from session_keeper._facts_codec import turn_facts_from_dict

        return turn_facts_from_dict(data)

    def to_prompt(self) -> str:
        """A few lines for an LLM: restarted or not, what was lost, what to do about it."""
        from session_keeper._facts_codec import turn_facts_prompt

        return turn_facts_prompt(self)


@attrs.frozen(kw_only=True)
class Decision:
    """The keeper's answer to "may this conversation do this on this site now?"."""

    outcome: Outcome
    conversation: str
    site: str
    action: str
    #: Why, in words a person can act on (``None`` when the outcome is ``act``).
    reason: str | None = None
    #: The conversation that recorded the site's login, when there is one.
    login_owner: str | None = None
    generation: int | None = None
    #: ``act`` on a login that survived a restart but has not been re-validated.
    needs_revalidation: bool = False
    #: This answer used up one of a counted grant's ``uses`` (``decide`` and ``admit``).
    spent_use: bool = False

    @property
    def allowed(self) -> bool:
        """True when the outcome is ``act``."""
        return self.outcome == "act"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; see :meth:`from_dict`."""
        from session_keeper._facts_codec import decision_to_dict

        return decision_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """Read :meth:`to_dict`'s form back. Raises InvalidArgument / InvalidArgumentType."""
        from session_keeper._facts_codec import decision_from_dict

        return decision_from_dict(data)

    def to_prompt(self) -> str:
        """One line for an LLM: allowed, or why not and what to ask for."""
        from session_keeper._facts_codec import decision_prompt

        return decision_prompt(self)


@attrs.frozen(kw_only=True)
class ClosedBrowser:
    """A browser the sweep closed because nobody used it."""

    browser_id: str
    generation: int
    idle: timedelta

    @property
    def idle_minutes(self) -> int:
        """Idle time rounded to whole minutes."""
        return round(self.idle.total_seconds() / 60)


@attrs.frozen(kw_only=True)
class ClosedTab:
    """A conversation tab the sweep closed because nobody used it."""

    conversation: str
    last_url: str | None
    idle: timedelta


@attrs.frozen(kw_only=True)
class SweepReport:
    """What one :meth:`SessionKeeper.sweep` did."""

    at: datetime
    closed_browser: ClosedBrowser | None = None
    closed_tabs: tuple[ClosedTab, ...] = ()
    #: Grants removed because they expired or were used up.
    expired_grants: tuple[Grant, ...] = ()
    #: Conversations forgotten after ``conversation_idle_timeout`` without a turn.
    retired_conversations: tuple[str, ...] = ()

    @property
    def nothing_done(self) -> bool:
        """True when the sweep found nothing to close, expire or retire."""
        return (
            self.closed_browser is None
            and not self.closed_tabs
            and not self.expired_grants
            and not self.retired_conversations
        )


@attrs.frozen(kw_only=True)
class CookieFingerprint:
    """A cookie as the ledger remembers it: its identity and a keyed hash of its value."""

    name: str
    domain: str
    path: str = "/"
    #: HMAC-SHA256 of the value under the keeper's key, hex.
    fingerprint: str = attrs.field(repr=False)
    is_session: bool = True
    #: Set without ``Domain``: sent to ``domain`` only, not its subdomains. (Older
    #: records lack it and read as ``False``: a domain cookie, the wider reach.)
    host_only: bool = False
    #: ``Secure``: sent over ``https`` (and to local hosts) only.
    secure: bool = False


@attrs.frozen(kw_only=True)
class LoginRecord:
    """Who signed in where, when, in which browser generation; fingerprints, never values."""

    site: str
    owner: str
    account: str | None = None
    recorded_at: datetime
    generation: int
    cookies: tuple[CookieFingerprint, ...]
    #: Set when the login survived a restart: present, same cookies, not yet re-validated.
    needs_revalidation: bool = False


@attrs.frozen(kw_only=True)
class BrowserLost:
    """Said the moment the keeper learns a browser is gone (before anyone calls ``ensure()``)."""

    browser_id: str
    generation: int
    cause: EndCause
    at: datetime


@attrs.frozen(kw_only=True)
class TabView:
    """A conversation's tab as the keeper knows it now (for consoles and dashboards)."""

    conversation: str
    #: Whether the tab is open in the live browser.
    open: bool
    #: The URL the tab shows now, as the browser last reported it (``None`` when closed).
    url: str | None
    #: The tab's last verified URL, and when it was verified.
    last_verified_url: str | None
    verified_at: datetime
    #: The generation the tab belongs to.
    generation: int
    #: How long since the keeper last used the tab (``None`` for a remembered tab).
    idle: timedelta | None
