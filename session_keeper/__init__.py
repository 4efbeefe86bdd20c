"""session_keeper: keeps a persistent browser honest for AI agents."""

import logging as _logging

from session_keeper._browser.cdp import CdpBackend
from session_keeper._browser.chromium import find_chromium
from session_keeper._browser.playwright import PlaywrightBackend
from session_keeper._guard.guard import Guard
from session_keeper._keeper.handle import ConversationTab, TabLocator
from session_keeper._keeper.keeper import SessionKeeper
from session_keeper._keeper.logins import LoginProbe
from session_keeper._keeper.sweeper import Sweeper
from session_keeper._model.authorisation import RestartPolicy
from session_keeper._model.borrows import BorrowRequest
from session_keeper._model.facts import (
    BrowserLost,
    Decision,
    LoginRecord,
    Lost,
    SweepReport,
    TurnFacts,
)
from session_keeper._model.grants import Grant
from session_keeper.errors import (
    BrowserError,
    BrowserGoneError,
    LoginNotObserved,
    NavigationBlocked,
    SessionKeeperError,
    UsageError,
)
from session_keeper.stores._sqlite import SqliteStore

__all__ = [
    "BorrowRequest",
    "BrowserError",
    "BrowserGoneError",
    "BrowserLost",
    "CdpBackend",
    "ConversationTab",
    "Decision",
    "Grant",
    "Guard",
    "LoginNotObserved",
    "LoginProbe",
    "LoginRecord",
    "Lost",
    "NavigationBlocked",
    "PlaywrightBackend",
    "RestartPolicy",
    "SessionKeeper",
    "SessionKeeperError",
    "SqliteStore",
    "SweepReport",
    "Sweeper",
    "TabLocator",
    "TurnFacts",
    "UsageError",
    "find_chromium",
]

# A library stays quiet unless the application configures logging.
_logging.getLogger("session_keeper").addHandler(_logging.NullHandler())
