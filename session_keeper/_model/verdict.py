"""The Guard's answer for one request, as a value: may it leave the browser, and if not, why."""

from __future__ import annotations

import attrs

from session_keeper._leaf.blocks import BlockRule

__all__ = ["GuardVerdict"]


@attrs.frozen(kw_only=True)
class GuardVerdict:
    """The Guard's answer for one request: may it leave the browser, and if not, why."""

    allowed: bool
    #: The rule that refused it (``None`` when allowed).
    rule: BlockRule | None = None
    #: Why it was refused, in words (names only, never a secret); empty when allowed.
    reason: str = ""
    #: The signed-in site whose login decided it, if any.
    site: str | None = None
    #: The action it counts as on ``site`` (``read``/``write`` or an override).
    action: str | None = None
    #: The request used up one of a counted grant's uses (``SessionKeeper.admit``).
    spent: bool = False
    #: Every signed-in site whose login the request was admitted under (when allowed).
    sites: tuple[str, ...] = ()
