"""The values a keeper hands out: turn facts, losses, decisions, logins, grants, sweep
reports, tabs and borrow requests.
"""

from session_keeper._keeper.handle import ConversationTab, TabLocator
from session_keeper._keeper.logins import LoginProbe
from session_keeper._keeper.state import GenerationRecord
from session_keeper._keeper.sweeper import Sweeper
from session_keeper._model.authorisation import RestartPolicy
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
from session_keeper._model.grants import Grant

__all__ = [
    "PROBE_CONVERSATION",
    "BorrowRequest",
    "BrowserLost",
    "ClosedBrowser",
    "ClosedTab",
    "ConversationTab",
    "CookieFingerprint",
    "Decision",
    "GenerationRecord",
    "Grant",
    "LoginProbe",
    "LoginRecord",
    "Lost",
    "RestartPolicy",
    "SweepReport",
    "Sweeper",
    "TabLocator",
    "TabView",
    "TurnFacts",
]
