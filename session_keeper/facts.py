"""The values a keeper hands out: turn facts, losses, decisions, logins, sweep reports,
tab views and borrow requests. (Handles and configuration — ``ConversationTab``,
``TabLocator``, ``Sweeper``, ``LoginProbe``, ``RestartPolicy``, ``Grant`` — live in
:mod:`session_keeper`.)
"""

from session_keeper._keeper.logins.renewal import Renewal
from session_keeper._keeper.state.saved import GenerationRecord
from session_keeper._keeper.tabs.replay import ReplayFrame
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
