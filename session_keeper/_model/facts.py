"""Facts the keeper hands across its boundary: frozen, keyword-only values."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, assert_never, get_args

import attrs

from session_keeper._model.grants import Grant
from session_keeper._model.losses import LossCause as LossCause
from session_keeper._model.losses import Lost as Lost
from session_keeper._model.losses import LostKind as LostKind
from session_keeper._model.losses import loss_prompt_line
from session_keeper._model.storage import StorageFingerprint
from session_keeper._util.redact import redact_url
from session_keeper.errors import InvalidArgument, InvalidArgumentType

#: The conversation that owns the keeper's own probe pages: they ask "who is signed
#: in?" after a restart. The Guard lets it read signed-in sites and never write.
PROBE_CONVERSATION: Final = "session-keeper:probe"

#: What a turn can do with a login, as decided by :meth:`SessionKeeper.decide`.
Outcome = Literal["act", "block", "stop", "need_login"]

#: How a generation ended.
EndCause = Literal["closed", "crashed", "idle", "process_exit"]


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
    #: Sites whose login the keeper signed in again from the site's recipe
    #: (:meth:`SessionKeeper.renew_login`): a fresh sign-in, never a survival. The loss
    #: that led to it may be in ``lost`` (this turn) or may have been told earlier.
    renewed: tuple[str, ...] = ()
    #: The generation this conversation last saw, when ``restarted``.
    previous_generation: int | None = None
    #: The keeper knew nothing of this conversation before this turn: it never saw it, or
    #: forgot it (:meth:`SessionKeeper.forget`, or idle past ``IdleTimeouts.conversation``).
    #: Nothing it may remember from an earlier turn (a tab, a page) is here.
    first_turn: bool = False

    @property
    def lost_logins(self) -> tuple[Lost, ...]:
        """The logins in ``lost``."""
        return tuple(x for x in self.lost if x.kind == "login")

    @property
    def lost_input(self) -> tuple[Lost, ...]:
        """The form fields whose typed, unsubmitted input the restart took (names only)."""
        return tuple(x for x in self.lost if x.kind == "input")

    @property
    def lost_downloads(self) -> tuple[Lost, ...]:
        """The downloads the restart took before anyone saved them."""
        return tuple(x for x in self.lost if x.kind == "download")

    @property
    def lost_tab(self) -> Lost | None:
        """This conversation's lost tab, if it lost one."""
        return next((x for x in self.lost if x.kind == "tab"), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (names, UTC instants, URLs without query); see :meth:`from_dict`."""

        return turn_facts_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnFacts:
        """Read :meth:`to_dict`'s form back. Raises InvalidArgument / InvalidArgumentType."""

        return turn_facts_from_dict(data)

    def to_prompt(self) -> str:
        """A few lines for an LLM: restarted or not, what was lost, what to do about it."""

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

        return decision_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decision:
        """Read :meth:`to_dict`'s form back. Raises InvalidArgument / InvalidArgumentType."""

        return decision_from_dict(data)

    def to_prompt(self) -> str:
        """One line for an LLM: allowed, or why not and what to ask for."""

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
    #: Conversations forgotten after ``IdleTimeouts.conversation`` without a turn.
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
    #: The web storage items (``localStorage`` / ``sessionStorage``) that carry the
    #: login, for a site that keeps its token there; fingerprints, never values.
    storage: tuple[StorageFingerprint, ...] = ()


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
    #: Where the tab last was on the web (its last committed ``http(s)`` URL, or as
    #: ``mark_verified`` set it), and when the keeper learnt it.
    last_verified_url: str | None
    verified_at: datetime
    #: The generation the tab belongs to.
    generation: int
    #: How long since the keeper last used the tab (``None`` for a remembered tab).
    idle: timedelta | None


# -- as JSON (a graph's state, a tool result) and as prompt text: names, UTC instants and
# URLs without query or fragment, never a cookie value; from_dict builds nothing malformed.

#: Bumped when the JSON shape changes incompatibly.
FACTS_FORMAT = 1


def _dt(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _need(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in d:
        raise InvalidArgument(f"{what} has no {key!r}")
    value = d[key]
    if isinstance(value, bool) and kind is not bool and bool not in _tuple(kind):
        raise InvalidArgumentType(f"{what}.{key} must not be a bool")
    if not isinstance(value, kind):
        raise InvalidArgumentType(f"{what}.{key} has the wrong type ({type(value).__name__})")
    return value


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _when(value: str, what: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{what} is not an ISO 8601 instant") from None
    if parsed.tzinfo is None:
        raise InvalidArgument(f"{what} has no time zone")
    return parsed.astimezone(UTC)


def _mapping(data: object, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise InvalidArgumentType(f"{what} must be a mapping, not {type(data).__name__}")
    fmt = data.get("format", FACTS_FORMAT)
    if fmt != FACTS_FORMAT:
        raise InvalidArgument(f"{what} has format {fmt!r}; this code reads {FACTS_FORMAT}")
    return data


def _strings(d: Mapping[str, Any], key: str, what: str) -> tuple[str, ...]:
    values = _need(d, key, list, what)
    if not all(isinstance(v, str) for v in values):
        raise InvalidArgumentType(f"{what}.{key} must be a list of str")
    return tuple(values)


def lost_to_dict(x: Lost) -> dict[str, Any]:
    """One loss as JSON."""
    return {
        "kind": x.kind,
        "name": x.name,
        "owner": x.owner,
        "when": _dt(x.when),
        "last_url": redact_url(x.last_url),
        "generation": x.generation,
        "cause": x.cause,
    }


def lost_from_dict(d: object) -> Lost:
    """One loss back from JSON. Raises InvalidArgument / InvalidArgumentType."""

    m = _mapping(d, "lost")
    kind = _need(m, "kind", str, "lost")
    cause = _need(m, "cause", str, "lost")
    if kind not in get_args(LostKind):
        raise InvalidArgument(f"unknown lost kind {kind!r}")
    if cause not in get_args(LossCause):
        raise InvalidArgument(f"unknown loss cause {cause!r}")
    last_url = m.get("last_url")
    if last_url is not None and not isinstance(last_url, str):
        raise InvalidArgumentType("lost.last_url must be a str or null")
    return Lost(
        kind=kind,
        name=_need(m, "name", str, "lost"),
        owner=_need(m, "owner", str, "lost"),
        when=_when(_need(m, "when", str, "lost"), "lost.when"),
        last_url=last_url,
        generation=_need(m, "generation", int, "lost"),
        cause=cause,
    )


def turn_facts_to_dict(f: TurnFacts) -> dict[str, Any]:
    """TurnFacts as JSON."""
    return {
        "format": FACTS_FORMAT,
        "conversation": f.conversation,
        "browser_id": f.browser_id,
        "generation": f.generation,
        "restarted": f.restarted,
        "previous_generation": f.previous_generation,
        "lost": [lost_to_dict(x) for x in f.lost],
        "revalidate": list(f.revalidate),
        "restored": list(f.restored),
        "renewed": list(f.renewed),
        "first_turn": f.first_turn,
    }


def turn_facts_from_dict(d: object) -> TurnFacts:
    """TurnFacts back from JSON. Raises InvalidArgument / InvalidArgumentType."""

    m = _mapping(d, "turn facts")
    previous = m.get("previous_generation")
    if previous is not None and (isinstance(previous, bool) or not isinstance(previous, int)):
        raise InvalidArgumentType("turn facts.previous_generation must be an int or null")
    return TurnFacts(
        conversation=_need(m, "conversation", str, "turn facts"),
        browser_id=_need(m, "browser_id", str, "turn facts"),
        generation=_need(m, "generation", int, "turn facts"),
        restarted=_need(m, "restarted", bool, "turn facts"),
        previous_generation=previous,
        lost=tuple(lost_from_dict(x) for x in _need(m, "lost", list, "turn facts")),
        revalidate=_strings(m, "revalidate", "turn facts"),
        restored=_strings(m, "restored", "turn facts"),
        # Facts saved before renewal existed name no renewed login.
        renewed=_strings(m, "renewed", "turn facts") if "renewed" in m else (),
        first_turn=_first_turn(m),
    )


def _first_turn(m: Mapping[str, Any]) -> bool:
    # Facts saved before the field existed are of conversations the keeper knew.
    value = m.get("first_turn", False)
    if not isinstance(value, bool):
        raise InvalidArgumentType("turn facts.first_turn must be a bool")
    return value


def turn_facts_prompt(f: TurnFacts) -> str:
    """A few lines an LLM can read: what changed about the browser since its last turn."""
    if not f.restarted:
        if not f.lost and not f.revalidate and not f.renewed:
            return f"Browser {f.browser_id}: nothing changed since your last turn."
        # Same browser, but news all the same (a tab closed while idle or while no
        # keeper process ran, a login to re-check after our process restarted).
        lines = [f"Browser {f.browser_id}: the same browser, but since your last turn:"]
    else:
        was = f" (was browser-{f.previous_generation})" if f.previous_generation else ""
        lines = [f"Browser restarted: now {f.browser_id}{was}. Do not trust earlier page state."]
    for x in f.lost:
        if x.kind == "login" and x.name in f.renewed:
            continue  # told below: renewed since
        lines.append(loss_prompt_line(x, restored=f.restored))
    for site in f.renewed:
        lines.append(
            f"- Login to {site} renewed: the keeper signed in again (a fresh sign-in, "
            "not the old session). Reload its pages and look again before acting."
        )
    if f.revalidate:
        lines.append(f"- Logins to re-check before any change: {', '.join(f.revalidate)}.")
    if not f.lost and not f.revalidate and not f.renewed:
        lines.append("- Nothing of this conversation was lost.")
    return "\n".join(lines)


def decision_to_dict(d: Decision) -> dict[str, Any]:
    """Decision as JSON."""
    return {
        "format": FACTS_FORMAT,
        "outcome": d.outcome,
        "conversation": d.conversation,
        "site": d.site,
        "action": d.action,
        "reason": d.reason,
        "login_owner": d.login_owner,
        "generation": d.generation,
        "needs_revalidation": d.needs_revalidation,
        "spent_use": d.spent_use,
    }


def decision_from_dict(d: object) -> Decision:
    """Decision back from JSON. Raises InvalidArgument / InvalidArgumentType."""

    m = _mapping(d, "decision")
    outcome = _need(m, "outcome", str, "decision")
    if outcome not in get_args(Outcome):
        raise InvalidArgument(f"unknown decision outcome {outcome!r}")
    for key in ("reason", "login_owner"):
        if m.get(key) is not None and not isinstance(m[key], str):
            raise InvalidArgumentType(f"decision.{key} must be a str or null")
    generation = m.get("generation")
    if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
        raise InvalidArgumentType("decision.generation must be an int or null")
    return Decision(
        outcome=outcome,
        conversation=_need(m, "conversation", str, "decision"),
        site=_need(m, "site", str, "decision"),
        action=_need(m, "action", str, "decision"),
        reason=m.get("reason"),
        login_owner=m.get("login_owner"),
        generation=generation,
        needs_revalidation=_need(m, "needs_revalidation", bool, "decision"),
        spent_use=_need(m, "spent_use", bool, "decision"),
    )


def decision_prompt(d: Decision) -> str:
    """One line an LLM can act on."""
    what = f"{d.action} on {d.site}"
    match d.outcome:
        case "act":
            extra = " (re-validate the login first)" if d.needs_revalidation else ""
            return f"Allowed: {what}{extra}."
        case "block":
            verb = "Blocked"
        case "stop":
            verb = "Stop"
        case "need_login":
            verb = "Sign-in needed"
        case _:
            assert_never(d.outcome)
    return f"{verb}: {what}. {d.reason or ''}".rstrip()
