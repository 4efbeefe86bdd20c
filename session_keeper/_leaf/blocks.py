"""What a refused request leaves behind: a :class:`BlockRecord`, and the rules that refuse.

A leaf: it imports nothing else of session_keeper, so every layer can carry one, the
exception tree included (:class:`~session_keeper.errors.NavigationBlocked` holds its record).
"""

from __future__ import annotations

from typing import Literal

import attrs

__all__ = ["BlockRecord", "BlockRule"]

#: Which rule refused a request.
#: ``scheme``: a navigation off the web (``file:``, ``chrome:``...); ``self``: one of
#: session_keeper's own surfaces (MCP over HTTP, the console, a CDP endpoint);
#: ``unexplained``: a login found in the jar at launch that no record explains;
#: ``sign_in``: what another conversation's sign-in in progress set (its credentials
#: are that conversation's from their first instant).
BlockRule = Literal[
    "grant", "allowlist", "unowned", "unwatched", "scheme", "self", "unexplained", "sign_in"
]


@attrs.frozen(kw_only=True)
class BlockRecord:
    """One request the Guard answered with a local 403. Names only, never a secret."""

    conversation: str | None
    method: str
    #: ``scheme://host[:port]`` of the refused request.
    origin: str
    #: The path, without query string or fragment (they may carry tokens).
    path: str
    rule: BlockRule
    reason: str
    #: The signed-in site whose login the request would have carried, if any.
    site: str | None = None
    action: str | None = None
    resource_type: str | None = None
    #: ``True`` when the request was a redirect hop (seen through CDP ``Fetch``).
    redirect: bool = False
    generation: int | None = None

    def to_data(self) -> dict[str, object]:
        """The record as JSON-ready event data."""
        return attrs.asdict(self)
