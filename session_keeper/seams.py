"""The seams a keeper is built on: the browser backend and session protocols, cookies and
clocks. (The backends live in :mod:`session_keeper`, the Store protocol in
:mod:`session_keeper.stores`; their old paths here warn for one release.)
"""

from session_keeper._browser.backend import BrowserBackend, BrowserSession, CloseCause
from session_keeper._model.cookies import Cookie
from session_keeper._util.clock import Clock, SystemClock
from session_keeper._util.moved import moved_names as _moved_names

__all__ = [
    "BrowserBackend",
    "BrowserSession",
    "Clock",
    "CloseCause",
    "Cookie",
    "SystemClock",
]


# Moved to the namespace of their purpose; the old path works for one release.
_moved = _moved_names(
    __name__,
    {
        "CdpBackend": "session_keeper",
        "PlaywrightBackend": "session_keeper",
        "Store": "session_keeper.stores",
        "find_chromium": "session_keeper",
    },
)


def __getattr__(name: str) -> object:
    return _moved(name)
