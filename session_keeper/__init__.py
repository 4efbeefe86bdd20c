"""session_keeper: keeps a persistent browser honest for AI agents."""

import logging as _logging

from session_keeper._authorisation import RestartPolicy
from session_keeper._borrows import BorrowRequest
from session_keeper._cdp import CdpBackend
from session_keeper._chromium import find_chromium
from session_keeper._errors import (
    BrowserError,
    BrowserGoneError,
    LoginNotObserved,
    NavigationBlocked,
    SessionKeeperError,
    UsageError,
)
from session_keeper._facts import BrowserLost, Decision, LoginRecord, Lost, SweepReport, TurnFacts
from session_keeper._grants import Grant
from session_keeper._guard_playwright import Guard
from session_keeper._handle import ConversationTab, TabLocator
from session_keeper._keeper import SessionKeeper
from session_keeper._logins import LoginProbe
from session_keeper._playwright import PlaywrightBackend
from session_keeper._store._sqlite import SqliteStore
from session_keeper._sweeper import Sweeper

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
