"""The seams a keeper is built on (browser backends and sessions, cookies, clocks, the
Store protocol) and their real implementations.
"""

from session_keeper._backend import BrowserBackend, BrowserSession, CloseCause, Cookie
from session_keeper._cdp import CdpBackend
from session_keeper._chromium import find_chromium
from session_keeper._clock import Clock, SystemClock
from session_keeper._playwright import PlaywrightBackend
from session_keeper._store._protocol import Store

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
