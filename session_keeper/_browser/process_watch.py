"""ProcessWatch: a launched browser's main process, as its session watches and ends it.

Three ways to learn the process ended, fastest first on Linux: a look at ``/proc/<pid>``
every ``poll_interval`` seconds finding it condemned (a queued SIGKILL, an exit in
progress); the kernel's ``pidfd`` turning readable (the process is gone); a caller
asking :meth:`ProcessWatch.exited`. A SIGKILL goes through the pidfd when there is one,
so a reused pid is never signalled. Elsewhere (no ``/proc``, no ``pidfd``) only
``os.kill`` answers, and the watch degrades to that.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
from collections.abc import Callable
from pathlib import Path

from session_keeper._browser.process import group_leader, group_running, pid_running

__all__ = ["ProcessWatch"]


class ProcessWatch:
    """Watches the process ``pid`` (``None``: unknown, nothing is watched) and calls
    ``on_exit()`` from the event loop when it ends or is condemned (possibly more than
    once: the callback is idempotent). ``watch=False`` watches nothing; ``poll_interval``
    ``None`` turns the ``/proc`` look off. :meth:`stop` ends the watch."""

    def __init__(
        self,
        pid: int | None,
        loop: asyncio.AbstractEventLoop,
        on_exit: Callable[[], None],
        *,
        watch: bool,
        poll_interval: float | None,
    ) -> None:
        self.pid = pid
        # The browser's helpers share its group; a clean close waits for all of them.
        self.pgid = None if pid is None else group_leader(pid)
        self._loop = loop
        self._on_exit = on_exit
        self._pidfd: int | None = None
        if pid is not None and watch and hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(pid)
                loop.add_reader(self._pidfd, on_exit)
            except (OSError, NotImplementedError):
                # Old kernel, or a loop without add_reader: fall back to events alone.
                self._close_pidfd()
        # The pidfd only fires once the kernel finished tearing the process down; a
        # cheap look at /proc (two small reads) sees a SIGKILL or an exit start at once.
        self._interval = poll_interval if watch else None
        self._poll_handle: asyncio.TimerHandle | None = None
        if pid is not None and self._interval and Path(f"/proc/{pid}").is_dir():
            self._poll_handle = loop.call_later(self._interval, self._poll)

    @property
    def has_pidfd(self) -> bool:
        """Whether the kernel tells this watch of the exit (a pidfd is open)."""
        return self._pidfd is not None

    def exited(self) -> bool:
        """Whether the process has exited (or, without a pidfd, is not running)."""
        if self._pidfd is None:
            return self.pid is not None and not pid_running(self.pid)
        readable, _, _ = select.select([self._pidfd], [], [], 0)
        return bool(readable)

    def _poll(self) -> None:
        self._poll_handle = None
        if self.pid is None or self._interval is None:
            return
        if not pid_running(self.pid):
            self._on_exit()
            return
        self._poll_handle = self._loop.call_later(self._interval, self._poll)

    def _close_pidfd(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(fd)
            os.close(fd)

    def stop(self) -> None:
        """Stop watching (idempotent): the look is cancelled, the pidfd closed."""
        if self._poll_handle is not None:
            self._poll_handle.cancel()
            self._poll_handle = None
        self._close_pidfd()

    def group_running(self) -> bool:
        """Whether any process of the browser (its group, else the process) still runs."""
        if self.pgid is not None:
            return group_running(self.pgid)
        return self.pid is not None and pid_running(self.pid)

    def kill_group(self) -> None:
        """SIGKILL every process of the browser's group (else the process); never raises."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.pgid is not None:
                os.killpg(self.pgid, signal.SIGKILL)
            elif self.pid is not None:
                os.kill(self.pid, signal.SIGKILL)

    def signal_kill(self) -> bool:
        """SIGKILL the main process; ``False`` when it is unknown (nothing was sent)."""
        if self._pidfd is not None:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        elif self.pid is not None and pid_running(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        else:
            return False
        return True
