"""Restart facts as the first thing of a tool result: a short text banner and JSON."""

from __future__ import annotations

from session_keeper._model.facts import TurnFacts
from session_keeper._model.losses import loss_phrase


def worth_telling(facts: TurnFacts) -> bool:
    """Whether ``facts`` say anything the agent must hear before it acts."""
    return facts.restarted or bool(facts.lost) or bool(facts.revalidate) or bool(facts.renewed)


def banner(facts: TurnFacts) -> str:
    """A few lines an LLM reads before the tool's own output."""
    lines: list[str] = []
    if facts.restarted:
        before = (
            f"browser-{facts.previous_generation}"
            if facts.previous_generation is not None
            else "the previous browser"
        )
        lines.append(f"RESTARTED: the browser was replaced ({before} -> {facts.browser_id}).")
    if facts.lost:
        lines.append("Lost: " + "; ".join(loss_phrase(x) for x in facts.lost) + ".")
    if facts.renewed:
        lines.append(
            "Renewed: the keeper signed in again to " + ", ".join(facts.renewed) + " (a fresh "
            "sign-in from the site's recipe: page state from before it may be stale)."
        )
    if any(x.name not in facts.renewed for x in facts.lost_logins):
        lines.append(
            "Do not act on a lost login: ask the person to sign in again "
            "(then browser_record_login)."
        )
    if facts.revalidate:
        lines.append("Re-validate before any side effect: " + ", ".join(facts.revalidate) + ".")
    return "### Browser restart\n" + "\n".join(f"- {line}" for line in lines)
