"""What a tab's console said since the model last looked: Playwright MCP's ``### Events``.

Each tab's console messages and page errors at ``--console-level`` or above (default
``info``) are written, as they arrive, to a log of that tab's document: with an output
directory (``--output-dir``, or ``--action-snapshots file``'s ``./.playwright-mcp``),
``console-<start time>.log`` there, in Playwright MCP's line format, and a result names
the lines that are new since the tab's last result
(``- New console entries: console-….log#L3-L5``). With no directory, nothing is written:
when results carry their snapshot inline (the default), they list the new entries
themselves (the most recent :data:`INLINE_ENTRIES`); with ``--action-snapshots none`` /
``--snapshot-mode none`` (as few tokens as may be) they tell of none, and
``browser_console_messages`` lists them. ``browser_navigate`` starts a new log for the
tab, as Playwright MCP does.

What a page logs is the page's own text, so it is treated as the page's snapshot is: a
``--secrets`` value in it is shown by its name, never written.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from session_keeper._keeper.tabs.page_watch import ConsoleEntry, ConsoleLevel, PageWatch
from session_keeper._security.credentials import Secret
from session_keeper.errors import InvalidArgument
from session_keeper.mcp._outputs import OutputDir, link
from session_keeper.mcp._secrets import redact_text

__all__ = ["CONSOLE_LEVELS", "INLINE_ENTRIES", "ConsoleLogs"]

log = logging.getLogger("session_keeper.mcp")

#: The levels ``--console-level`` takes, most severe first.
CONSOLE_LEVELS: tuple[ConsoleLevel, ...] = ("error", "warning", "info", "debug")
#: How many new entries a result lists when there is no log file to point at.
INLINE_ENTRIES = 10


class _Log:
    """One document's log: its file (made at the first entry) and what was told."""

    __slots__ = ("file", "inline", "lines", "started_ms", "stopped", "told_lines", "told_seen")

    def __init__(self, started_ms: float) -> None:
        self.started_ms = started_ms
        self.file: Path | None = None
        self.lines = 0
        self.told_lines = 0
        #: Without a file: the entries not yet told (the newest kept).
        self.inline: list[str] = []
        self.told_seen = 0
        self.stopped = False


class ConsoleLogs:
    """Every watched tab's console log (see the module docstring)."""

    def __init__(
        self,
        outputs: OutputDir,
        *,
        level: str = "info",
        secrets: Mapping[str, Secret] | None = None,
        inline: bool = True,
    ) -> None:
        if level not in CONSOLE_LEVELS:
            raise InvalidArgument(f"console level is one of {', '.join(CONSOLE_LEVELS)}")
        self._rank = CONSOLE_LEVELS.index(level)
        self._outputs = outputs
        # Without a directory: whether results list the entries (else they tell of none).
        self._inline = inline
        self._secrets = dict(secrets or {})
        self._logs: weakref.WeakKeyDictionary[PageWatch, _Log] = weakref.WeakKeyDictionary()

    def follow(self, watch: PageWatch) -> None:
        """Log ``watch``'s tab from now on (once per tab)."""
        if watch in self._logs:
            return
        self._logs[watch] = _Log(_now_ms())
        ref = weakref.ref(watch)

        def listen(entry: ConsoleEntry) -> None:
            watched = ref()
            if watched is not None:
                self._append(watched, entry)

        watch.on_console(listen)

    def restart(self, watch: PageWatch) -> None:
        """The tab goes to a new document: what it logs from now on goes to a new log."""
        old = self._logs.get(watch)
        if old is None:
            self.follow(watch)
            return
        old.stopped = True
        self._logs[watch] = _Log(_now_ms())

    def _append(self, watch: PageWatch, entry: ConsoleEntry) -> None:
        if CONSOLE_LEVELS.index(entry.level) > self._rank:
            return
        if self._outputs.path is None and not self._inline:
            return
        current = self._logs.get(watch)
        if current is None or current.stopped:
            return
        text = redact_text(entry.render(), self._secrets)
        if self._outputs.path is None:
            current.inline = [*current.inline[-(INLINE_ENTRIES - 1) :], text]
            current.told_seen += 1
            return
        relative = round(entry.at - current.started_ms) if entry.at else 0
        line = f"[{relative:>8}ms] {text}\n"
        try:
            if current.file is None:
                current.file = self._outputs.new_file(
                    prefix="console", ext="log", when=_when(current.started_ms)
                )
            self._outputs.append(current.file, line.encode())
        except OSError as exc:
            # The page goes on; only its log stops (and says why, once).
            log.warning("console log for a tab stopped: %s", exc.strerror or exc)
            current.stopped = True
            return
        current.lines += line.count("\n")

    def take(self, watch: PageWatch | None) -> str | None:
        """The ``### Events`` line(s) for what ``watch``'s tab logged since the last
        call (``None``: nothing new)."""
        current = None if watch is None else self._logs.get(watch)
        if current is None:
            return None
        if current.file is not None:
            if current.lines == current.told_lines:
                return None
            first, last = current.told_lines + 1, current.lines
            current.told_lines = last
            where = f"#L{first}" if first == last else f"#L{first}-L{last}"
            return f"- New console entries: {link(current.file)}{where}"
        if not current.inline:
            return None
        count, shown = current.told_seen, current.inline
        current.inline, current.told_seen = [], 0
        more = count - len(shown)
        lines = [f"- New console entries ({count}):", *(f"  - {text}" for text in shown)]
        if more > 0:
            lines.insert(1, f"  - … {more} earlier (browser_console_messages lists them)")
        return "\n".join(lines)


def _now_ms() -> float:
    return datetime.now(UTC).timestamp() * 1000


def _when(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)
