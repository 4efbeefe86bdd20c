"""What a conversation can lose, as data: the one table of loss kinds, a named constructor
for each, and every text that describes one.

A new kind is two edits: its name in :data:`LostKind` with a constructor here (mypy then
points at each renderer below that lacks its case: they end in ``assert_never``), and the
part of the keeper that measures the loss and calls the constructor.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Literal, assert_never

import attrs

from session_keeper._util.redact import redact_url

__all__ = ["LossCause", "Lost", "LostKind", "loss_phrase", "loss_prompt_line"]

#: What was lost: a site's login, a conversation's tab, typed input never submitted, a
#: download never saved.
LostKind = Literal["login", "tab", "input", "download"]

#: Why it was lost. ``"gone"``: the browser no longer has it. ``"replaced"``: the
#: site's cookies are there but are not the ones recorded (another account or another
#: sign-in), so the recorded login is as good as lost. ``"idle"``: the sweep closed
#: an idle tab. ``"signed_out"``: the cookies are there but the site's login probe
#: says nobody is signed in (server-side expiry). ``"closed"``: a new keeper process
#: re-bound to the browser that lived on and found the tab's page no longer open.
LossCause = Literal["gone", "replaced", "idle", "signed_out", "closed"]


@attrs.frozen(kw_only=True)
class Lost:
    """One thing a conversation had and no longer has.

    ``str()`` is ``login:<site>``, ``tab:<conversation>``, ``input:<field>`` (typed into
    a form and not submitted: the field's name, never its value) or ``download:<file>``
    (started and not saved): the words a turn reports. Build one with the constructor of
    its kind (:meth:`login`, :meth:`tab`, :meth:`input`, :meth:`download`).
    """

    kind: LostKind
    #: The site (login), the conversation (tab), the form field (input) or the file
    #: name the site suggested (download).
    name: str
    #: The conversation that owned the login or the tab.
    owner: str
    #: When the login was recorded, or when the tab's URL was last verified.
    when: datetime
    #: Where the tab last was on the web: its main frame's last committed ``http(s)`` URL
    #: (``None`` for a login; an input's or download's page).
    last_url: str | None = None
    #: The generation in which it existed.
    generation: int
    cause: LossCause = "gone"

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"

    @classmethod
    def login(
        cls, site: str, *, owner: str, recorded_at: datetime, generation: int, cause: LossCause
    ) -> Lost:
        """A site's recorded login, gone from the browser (or replaced, or signed out)."""
        return cls._made("login", site, owner, recorded_at, None, generation, cause)

    @classmethod
    def tab(
        cls,
        conversation: str,
        *,
        verified_at: datetime,
        last_url: str | None,
        generation: int,
        cause: LossCause = "gone",
    ) -> Lost:
        """A conversation's tab, with where it last was on the web and when."""
        return cls._made(
            "tab", conversation, conversation, verified_at, last_url, generation, cause
        )

    @classmethod
    def input(
        cls, field: str, *, owner: str, typed_at: datetime, url: str | None, generation: int
    ) -> Lost:
        """What ``owner`` typed into the form field ``field`` and never submitted (the
        field's name only, never its value)."""
        return cls._made("input", field, owner, typed_at, url, generation)

    @classmethod
    def download(
        cls, filename: str, *, owner: str, started_at: datetime, url: str | None, generation: int
    ) -> Lost:
        """A download ``owner`` started and nobody saved (the name the site suggested)."""
        return cls._made("download", filename, owner, started_at, url, generation)

    @classmethod
    def _made(
        cls,
        kind: LostKind,
        name: str,
        owner: str,
        when: datetime,
        url: str | None,
        gen: int,
        cause: LossCause = "gone",
    ) -> Lost:
        # The constructors above, positionally: each kind says which fact is which.
        return cls(
            kind=kind, name=name, owner=owner, when=when, last_url=url, generation=gen, cause=cause
        )


_CAUSE_WORDS: dict[LossCause, str] = {
    "gone": "gone",
    "replaced": "replaced by other cookies (another account or sign-in)",
    "idle": "closed while idle",
    "signed_out": "signed out by the site",
    "closed": "closed while the keeper was away",
}


def loss_prompt_line(x: Lost, *, restored: Collection[str]) -> str:
    """One line of :meth:`TurnFacts.to_prompt`: what was lost, why, and what to do now.

    ``restored``: the sites whose lost login the vault put back this turn.
    """
    why = _CAUSE_WORDS[x.cause]
    at = f" at {redact_url(x.last_url)}" if x.last_url else ""
    match x.kind:
        case "login":
            again = " (restored from the vault; re-validate)" if x.name in restored else ""
            return (
                f"- Lost login to {x.name} (owner {x.owner}): {why}{again}. "
                "Do not act there until a human signs in again."
            )
        case "input":
            return (
                f"- Lost what was typed into {x.name!r}{at} (never submitted): {why}. "
                "Type it again if it is still needed."
            )
        case "download":
            return f"- Lost download {x.name!r} (not saved): {why}. Download it again."
        case "tab":
            return f"- Lost tab{at}: {why}. Reopen it and look again before acting."
        case _:
            assert_never(x.kind)


def loss_phrase(x: Lost) -> str:
    """What was lost in a few words, for a list after "Lost: " (a tool result's restart
    section)."""
    match x.kind:
        case "login":
            return f"the login to {x.name} (recorded by {x.owner}; {x.cause})"
        case "input":
            return f"what was typed into {x.name!r} and never submitted"
        case "download":
            return f"the download {x.name!r} (not saved)"
        case "tab":
            where = f", it was at {x.last_url}" if x.last_url else ""
            return f"your tab ({x.cause}{where})"
        case _:
            assert_never(x.kind)
