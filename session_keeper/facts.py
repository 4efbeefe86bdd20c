"""The values a keeper hands out: turn facts, losses, decisions, logins, sweep reports,
tab views and borrow requests. (Handles and configuration — ``ConversationTab``,
``TabLocator``, ``Sweeper``, ``LoginProbe``, ``RestartPolicy``, ``Grant`` — live in
:mod:`session_keeper`; their old paths here warn for one release.)
"""

from session_keeper._keeper.renewal import Renewal
from session_keeper._keeper.replay import ReplayFrame
from session_keeper._keeper.state import GenerationRecord
from session_keeper._model.borrows import BorrowRequest
from session_keeper._model.facts import (
    PROBE_CONVERSATION,
    BrowserLost,
    ClosedBrowser,
    ClosedTab,
    CookieFingerprint,
    Decision,
    LoginRecord,
    Lost,
    SweepReport,
    TabView,
    TurnFacts,
)
from session_keeper._model.ledger import SignInWindow
from session_keeper._util.moved import moved_names as _moved_names

__all__ = [
    "PROBE_CONVERSATION",
    "BorrowRequest",
    "BrowserLost",
    "ClosedBrowser",
    "ClosedTab",
    "CookieFingerprint",
    "Decision",
    "GenerationRecord",
    "LoginRecord",
    "Lost",
    "Renewal",
    "ReplayFrame",
    "SignInWindow",
    "SweepReport",
    "TabView",
    "TurnFacts",
]


# Moved to the namespace of their purpose; the old path works for one release.
_moved = _moved_names(
    __name__,
    {
        "ConversationTab": "session_keeper",
        "Grant": "session_keeper",
        "LoginProbe": "session_keeper",
        "RestartPolicy": "session_keeper",
        "Sweeper": "session_keeper",
        "TabLocator": "session_keeper",
    },
)


def __getattr__(name: str) -> object:
    return _moved(name)
