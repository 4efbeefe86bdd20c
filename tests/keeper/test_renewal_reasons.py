"""A renewal's refusal reason is the site's words without anything the recipe typed."""

from __future__ import annotations

from session_keeper._keeper.logins.renewal import REASON_LIMIT, _scrub
from session_keeper.security import Secret


def test_a_refusal_text_never_carries_a_value_typed() -> None:
    """Every typed value is replaced, short ones (below the log scrubber's length) and one
    inside another alike; the text is one line, bounded."""
    typed = [Secret("bob"), Secret("hunter2"), Secret("hunter2x"), Secret("123456")]
    text = "No account bob\n  with password hunter2x or hunter2;\tcode 123456 refused."
    assert _scrub(text, typed) == (
        "No account [redacted] with password [redacted] or [redacted]; code [redacted] refused."
    )
    assert len(_scrub("refused " * 100, typed)) == REASON_LIMIT
