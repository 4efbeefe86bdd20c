"""session_keeper: keeps a persistent browser honest for AI agents."""

import logging as _logging

from session_keeper._browser.cdp import CdpBackend
from session_keeper._browser.chromium import find_chromium
from session_keeper._browser.playwright import PlaywrightBackend
from session_keeper._guard.guard import Guard
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.facade.settings import Durability, IdleTimeouts, LoginSettings
from session_keeper._keeper.lifecycle.sweeper import Sweeper
from session_keeper._keeper.logins.login_records import LoginProbe
from session_keeper._keeper.logins.recipes import (
    FormField,
    FormRecipe,
    FormStep,
    PageSign,
    RenewalPolicy,
    ScriptRecipe,
    SignInAnswer,
)
from session_keeper._keeper.tabs.conversation_tab import ConversationTab
from session_keeper._keeper.tabs.replay import Replay, ReplayRecorder
from session_keeper._keeper.tabs.tab_locator import TabLocator
from session_keeper._model.authorisation import RestartPolicy
from session_keeper._model.grants import Grant
from session_keeper._telemetry import Telemetry
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
