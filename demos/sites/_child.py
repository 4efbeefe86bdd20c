"""A site served by a child process of its own: started, read from, ended.

The single sign-on sites (a Node process) and otp.example (a Django process) are both
run this way: the child prints its port as its first line once it listens, may answer
commands on its stdin one line each, and is ended when the test is done. What differs
(how to start it, what its first line says, what it leaves behind) stays with each site.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = ["ChildSite"]

#: How long an ended child has to exit before it is killed.
_EXIT_TIMEOUT_S = 10.0


class ChildSite:
    """The process half of a site: a subclass's ``start`` calls :meth:`_spawn` and reads
    its first line with :meth:`_line`; its ``stop`` calls :meth:`_end`. A context manager
    over ``start``/``stop``.
    """

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str] = queue.Queue()

    def start(self) -> Self:
        """Start the site (each site says how)."""
        raise NotImplementedError

    def stop(self) -> None:
        """End the site (each site says what else it removes)."""
        self._end()

    def _spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        stderr: IO[str],
        env: Mapping[str, str] | None = None,
        commands: bool = False,
    ) -> None:
        """Start ``argv``; its stdout lines are read as they come (see :meth:`_line`).

        ``commands``: the child reads commands on its stdin, and ends when it closes;
        otherwise its stdin is empty and it is ended with SIGTERM.
        """
        self._lines = queue.Queue()
        self._proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            stdin=subprocess.PIPE if commands else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=None if env is None else dict(env),
        )
        assert self._proc.stdout is not None
        threading.Thread(target=self._read, args=(self._proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.strip())
        self._lines.put("")  # the process ended

    def _line(self, timeout_s: float) -> str:
        """The child's next stdout line (``""`` when it ended or said nothing in time)."""
        try:
            return self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return ""

    def _end(self) -> None:
        """End the child (closing its stdin, or SIGTERM), killing it if it does not exit
        in time (no-op when none runs)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        else:
            proc.terminate()
        try:
            proc.wait(_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
