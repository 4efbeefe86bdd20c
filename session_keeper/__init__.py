"""session_keeper: keeps a persistent browser honest for AI agents."""

import logging as _logging

from session_keeper._browser.cdp import CdpBackend
from session_keeper._browser.chromium import find_chromium
from session_keeper._browser.playwright import PlaywrightBackend
from session_keeper._guard.guard import Guard
from session_keeper._keeper.handle import ConversationTab
from session_keeper._keeper.keeper import SessionKeeper
from session_keeper._keeper.locator import TabLocator
from session_keeper._keeper.logins import LoginProbe
from session_keeper._keeper.recipe import (
    FormField,
    FormRecipe,
    FormStep,
    PageSign,
    RenewalPolicy,
    ScriptRecipe,
    SignInAnswer,
)
from session_keeper._keeper.replay import Replay, ReplayRecorder
from session_keeper._keeper.settings import Durability, IdleTimeouts, LoginSettings
from session_keeper._keeper.sweeper import Sweeper
from session_keeper._model.authorisation import RestartPolicy
from session_keeper._model.grants import Grant
from session_keeper._telemetry import Telemetry
from session_keeper._util.moved import moved_names as _moved_names
from session_keeper._util.version import package_version as _package_version

__all__ = [
    "CdpBackend",
    "ConversationTab",
    "Durability",
    "FormField",
    "FormRecipe",
    "FormStep",
    "Grant",
    "Guard",
    "IdleTimeouts",
    "LoginProbe",
    "LoginSettings",
    "PageSign",
    "PlaywrightBackend",
    "RenewalPolicy",
    "Replay",
    "ReplayRecorder",
    "RestartPolicy",
    "ScriptRecipe",
    "SessionKeeper",
    "SignInAnswer",
    "Sweeper",
    "TabLocator",
    "Telemetry",
    "find_chromium",
]

#: The installed distribution's version (its metadata: the one source ``session-keeper
#: --version`` and the MCP server's ``serverInfo`` read too).
__version__: str = _package_version()

# A library stays quiet unless the application configures logging.
_logging.getLogger("session_keeper").addHandler(_logging.NullHandler())


# Moved to the namespace of their purpose; the old path works for one release.
_moved = _moved_names(
    __name__,
    {
        "BorrowRequest": "session_keeper.facts",
        "BrowserError": "session_keeper.errors",
        "BrowserGoneError": "session_keeper.errors",
        "BrowserLost": "session_keeper.facts",
        "Decision": "session_keeper.facts",
        "LoginNotObserved": "session_keeper.errors",
        "LoginRecord": "session_keeper.facts",
        "Lost": "session_keeper.facts",
        "NavigationBlocked": "session_keeper.errors",
        "SessionKeeperError": "session_keeper.errors",
        "SqliteStore": "session_keeper.stores",
        "SweepReport": "session_keeper.facts",
        "TurnFacts": "session_keeper.facts",
        "UsageError": "session_keeper.errors",
    },
)


def __getattr__(name: str) -> object:
    return _moved(name)
