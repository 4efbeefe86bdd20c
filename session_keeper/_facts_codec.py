"""TurnFacts and Decision as JSON (for a graph's state, a tool result) and as prompt text.

The JSON form carries names, instants (UTC ISO 8601) and URLs without their query
string or fragment (they may carry tokens) — never a cookie value. ``from_dict`` is
strict: a malformed value raises :class:`~session_keeper.InvalidArgument` (or
``InvalidArgumentType``) and builds nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, get_args

from session_keeper._errors import InvalidArgument, InvalidArgumentType
from session_keeper._redact import redact_url

if TYPE_CHECKING:
    from session_keeper._facts import Decision, Lost, TurnFacts

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
    from session_keeper._facts import LossCause, Lost, LostKind

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
    }


def turn_facts_from_dict(d: object) -> TurnFacts:
    """TurnFacts back from JSON. Raises InvalidArgument / InvalidArgumentType."""
    from session_keeper._facts import TurnFacts

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
    )


_CAUSE_WORDS = {
    "gone": "gone",
    "replaced": "replaced by other cookies (another account or sign-in)",
    "idle": "closed while idle",
    "signed_out": "signed out by the site",
    "closed": "closed while the keeper was away",
}


def turn_facts_prompt(f: TurnFacts) -> str:
    """A few lines an LLM can read: what changed about the browser since its last turn."""
    if not f.restarted:
        if not f.lost and not f.revalidate:
            return f"Browser {f.browser_id}: nothing changed since your last turn."
        # Same browser, but news all the same (a tab closed while idle or while no
        # keeper process ran, a login to re-check after our process restarted).
        lines = [f"Browser {f.browser_id}: the same browser, but since your last turn:"]
    else:
        was = f" (was browser-{f.previous_generation})" if f.previous_generation else ""
        lines = [f"Browser restarted: now {f.browser_id}{was}. Do not trust earlier page state."]
    for x in f.lost:
        why = _CAUSE_WORDS.get(x.cause, x.cause)
        if x.kind == "login":
            restored = " (restored from the vault; re-validate)" if x.name in f.restored else ""
            lines.append(
                f"- Lost login to {x.name} (owner {x.owner}): {why}{restored}. "
                "Do not act there until a human signs in again."
            )
        else:
            at = f" at {redact_url(x.last_url)}" if x.last_url else ""
            lines.append(f"- Lost tab{at}: {why}. Reopen it and look again before acting.")
    if f.revalidate:
        lines.append(f"- Logins to re-check before any change: {', '.join(f.revalidate)}.")
    if not f.lost and not f.revalidate:
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
    from session_keeper._facts import Decision, Outcome

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
    if d.outcome == "act":
        extra = " (re-validate the login first)" if d.needs_revalidation else ""
        return f"Allowed: {what}{extra}."
    verb = {"block": "Blocked", "stop": "Stop", "need_login": "Sign-in needed"}[d.outcome]
    return f"{verb}: {what}. {d.reason or ''}".rstrip()
