"""The seams a keeper is built on: the browser backend and session protocols, cookies and
clocks. (The backends live in :mod:`session_keeper`, the Store protocol in
:mod:`session_keeper.stores`.)
"""

from session_keeper._browser.backend import BrowserBackend, BrowserSession, CloseCause
from session_keeper._model.cookies import Cookie
from session_keeper._util.clock import Clock, SystemClock

__all__ = [
    "BrowserBackend",
    "BrowserSession",
    "Clock",
    "CloseCause",
    "Cookie",
    "SystemClock",
]
