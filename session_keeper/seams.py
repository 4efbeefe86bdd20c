"""The seams a keeper is built on (browser backends and sessions, cookies, clocks, the
Store protocol) and their real implementations.
"""

from session_keeper._browser.backend import BrowserBackend, BrowserSession, CloseCause
from session_keeper._browser.cdp import CdpBackend
from session_keeper._browser.chromium import find_chromium
from session_keeper._browser.playwright import PlaywrightBackend
from session_keeper._model.cookies import Cookie
from session_keeper._util.clock import Clock, SystemClock
from session_keeper.stores._protocol import Store

__all__ = [
    "BrowserBackend",
    "BrowserSession",
    "CdpBackend",
    "Clock",
    "CloseCause",
    "Cookie",
    "PlaywrightBackend",
    "Store",
    "SystemClock",
    "find_chromium",
]
