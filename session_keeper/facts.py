"""The values a keeper hands out: turn facts, losses, decisions, logins, grants, sweep
reports, tabs and borrow requests.
"""

from session_keeper._authorisation import RestartPolicy
from session_keeper._borrows import BorrowRequest
from session_keeper._facts import (
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
from session_keeper._grants import Grant
from session_keeper._handle import ConversationTab, TabLocator
from session_keeper._keeper_state import GenerationRecord
from session_keeper._logins import LoginProbe
from session_keeper._sweeper import Sweeper

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
