"""Everything ``session-keeper mcp`` checks before it says it is serving.

An MCP client (Claude Desktop, Cursor) starts the server and shows its stderr only when
something breaks; a server that announces itself and then fails every tool call is the
worst case. So the whole configuration is tried first, the way the server will use it:
the profile directory (usable, and held by no other server or browser), Chromium, a
display for ``--headed``, and the store (opened for real, so a PostgreSQL server that
refuses says so at once). Each failure is a :class:`ConfigProblem`: what is wrong and
the fix, printed as one line.

The profile stays held while the server runs (:class:`ServerHold`): a second server on
the same profile is refused at its start, not at its first tool call.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

from session_keeper._browser.chromium import INSTALL_HINT, find_chromium
from session_keeper._browser.playwright import KEEPER_LOCK_NAME
from session_keeper._browser.process import check_profile_free
from session_keeper._util.commands import ConfigProblem
from session_keeper.errors import ChromiumNotFound, ProfileInUse

#: The file in the profile a running server holds an exclusive ``flock`` on (its pid
#: inside), for as long as it serves.
SERVER_LOCK_NAME = ".session-keeper-mcp.lock"

_ONE_SERVER = (
    "serve every client from that one server (--http with --tokens), or give this one "
    "its own --profile (or --isolated)"
)


def check_display(*, headed: bool, env: Mapping[str, str] | None = None) -> None:
    """A headed browser needs a display: ``$DISPLAY`` or ``$WAYLAND_DISPLAY`` (Linux)."""
    values = os.environ if env is None else env
    if not headed or not sys.platform.startswith("linux"):
        return
    if values.get("DISPLAY") or values.get("WAYLAND_DISPLAY"):
        return
    raise ConfigProblem(
        what="--headed needs a display, and neither $DISPLAY nor $WAYLAND_DISPLAY is set",
        fix="drop --headed (headless is the default; a person signs in through "
        "--console HOST:PORT), or run the server under xvfb-run",
    )


def check_chromium(executable: str | None) -> str:
    """The Chromium the server will run (``--executable``, else the one found)."""
    if executable is not None:
        path = Path(executable).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigProblem(
                what=f"--executable {executable} is not an executable file",
                fix="give the path of a Chromium or Chrome, or drop --executable to use "
                "the one found on this machine",
            )
        return str(path)
    try:
        return find_chromium()
    except ChromiumNotFound as exc:
        raise ConfigProblem(
            what=str(exc).replace(INSTALL_HINT, "").strip(),
            fix="install Chromium (Debian/Ubuntu: apt-get install chromium; or python -m "
            "playwright install chromium), or give --executable PATH",
        ) from None


def check_profile(profile: Path) -> Path:
    """The profile directory, created if missing; refuses a file or a place it cannot
    write. Returns it resolved."""
    path = profile.expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigProblem(
            what=f"--profile {profile} is a file, not a directory",
            fix="give --profile a directory (it is created if missing), e.g. "
            f"{path.with_name(path.name + '-profile')}",
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigProblem(
            what=f"cannot create profile directory {profile}: {exc.strerror}",
            fix="give --profile a directory this user may create and write",
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigProblem(
            what=f"cannot write profile directory {profile} (permission denied)",
            fix="give --profile a directory this user may write",
        )
    return path.resolve()


@attrs.define
class ServerHold:
    """This server's hold on its profile: an exclusive ``flock`` on
    :data:`SERVER_LOCK_NAME`, released by :meth:`release` (or by the process's end)."""

    profile: Path
    _fd: int | None = attrs.field(default=None, alias="fd")

    @classmethod
    def take(cls, profile: Path) -> ServerHold:
        """Hold ``profile`` for this server, or raise :class:`ConfigProblem` naming who
        holds it: another server, another session_keeper browser, or a live Chromium."""
        lock = profile / SERVER_LOCK_NAME
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigProblem(
                what=f"cannot use profile directory {profile}: {exc.strerror}",
                fix="give --profile a directory this user may write",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"another session-keeper mcp (pid {holder})" if holder else "another server"
            raise ConfigProblem(
                what=f"profile {profile} is held by {who}", fix=_ONE_SERVER
            ) from None
        hold = cls(profile, fd=fd)
        try:
            _check_no_browser(profile)
        except BaseException:
            hold.release()
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return hold

    def release(self) -> None:
        """Let the profile go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _check_no_browser(profile: Path) -> None:
    """No session_keeper browser (its launch lock) and no other Chromium holds ``profile``."""
    with contextlib.suppress(FileNotFoundError):
        fd = os.open(profile / KEEPER_LOCK_NAME, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigProblem(
                what=f"profile {profile} is in use by another session_keeper browser",
                fix=_ONE_SERVER,
            ) from None
        finally:
            os.close(fd)  # closing releases a lock we took: only a look
    try:
        check_profile_free(profile)
    except ProfileInUse as exc:
        raise ConfigProblem(
            what=str(exc),
            fix="close the browser that has it open, or give --profile another directory",
        ) from None


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None
