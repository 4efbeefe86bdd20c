"""The browser's process and its profile lock, read from ``/proc`` and the profile directory.

How PlaywrightBackend finds the Chromium it started (the profile's ``SingletonLock``,
checked against ``/proc/<pid>/cmdline``), tells a running process from a condemned one
(a queued SIGKILL, an exit in progress) and tells a live profile lock from a stale one.
Linux ``/proc``; elsewhere every helper degrades to what ``os.kill`` can tell.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from pathlib import Path

from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import ProfileInUse

__all__ = [
    "SINGLETON_FILES",
    "check_profile_free",
    "find_browser_pid",
    "group_leader",
    "group_running",
    "pid_running",
    "proc_cmdline",
    "read_singleton_lock",
]

log = scrubbing_logger("session_keeper.playwright")

#: Files Chromium uses to keep one browser per profile (Linux, macOS).
SINGLETON_FILES = ("SingletonLock", "SingletonSocket", "SingletonCookie")

# Names a browser's main process goes by (``comm`` or argv[0]); used to tell a live
# browser holding a lock from an unrelated process that reused a dead browser's pid.
_BROWSER_NAMES = ("chrom", "headless_shell", "msedge", "brave")


#: Linux task flag: the process is exiting (include/linux/sched.h).
_PF_EXITING = 0x00000004


def proc_cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def sigkill_pending(pid: int) -> bool:
    """Whether a SIGKILL is queued for ``pid`` (thread or group), per /proc/<pid>/status."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd"):
            with contextlib.suppress(ValueError):
                if int(value.strip(), 16) & (1 << (signal.SIGKILL - 1)):
                    return True
    return False


def pid_running(pid: int) -> bool:
    """Whether ``pid`` is a process that runs and will run again.

    ``False`` for a missing or zombie process, and for one already condemned: a
    SIGKILL queued for it (the kernel queues it in the ``kill()`` call itself) or
    the kernel tearing it down (``PF_EXITING``). Such a process never executes
    another instruction of its own, but tearing down a big browser takes the kernel
    40-170 ms here before the process exit is visible any other way. Assumes the
    main thread lives as long as the process, as a browser's UI thread does.
    """
    stat = Path(f"/proc/{pid}/stat")
    try:
        text = stat.read_text()
    except FileNotFoundError:
        return False
    except OSError:
        text = ""
    if text:
        # Format: "pid (comm) state ppid pgrp session tty tpgid flags ..."; comm may
        # contain spaces and parentheses, so split after the last ")".
        fields = text.rpartition(")")[2].split()
        if fields[:1] in (["Z"], ["X"]):
            return False
        # A SIGKILLed browser tears down its memory before it becomes a zombie; its
        # pipe can close (and Playwright report the close) first. PF_EXITING is set
        # from the start of that teardown: the process will never run again.
        if len(fields) > 6 and fields[6].isdigit() and int(fields[6]) & _PF_EXITING:
            return False
        return not sigkill_pending(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_leader(pid: int) -> int | None:
    """``pid`` when it leads its own process group (Playwright starts Chromium so), else None."""
    try:
        return pid if os.getpgid(pid) == pid else None
    except OSError:
        return None


def group_running(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies and condemned ones don't).

    A browser's helpers (network service, zygotes, renderers) share its process group
    and can outlive its main process; the network service is the one that writes the
    cookie store. Without ``/proc``, only the leader can be looked at.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        return pid_running(pgid)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 2 and fields[2] == str(pgid) and pid_running(int(entry.name)):
            return True
    return False


def looks_like_browser(pid: int) -> bool:
    """Whether the live process ``pid`` is plausibly a Chromium-family browser."""
    cmdline = proc_cmdline(pid)
    if cmdline is None:
        # No /proc (not Linux) or not readable: we cannot tell, so be safe.
        return True
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip().lower()
    except OSError:
        comm = ""
    argv0 = os.path.basename(cmdline[0]).lower() if cmdline else ""
    if any(n in comm or n in argv0 for n in _BROWSER_NAMES):
        return True
    return any(a.startswith("--user-data-dir") for a in cmdline)


def is_main_browser_of(pid: int, profile: Path) -> bool:
    """Whether ``pid`` is the browser (not a renderer/zygote) started on ``profile``."""
    cmdline = proc_cmdline(pid)
    if cmdline is None or not pid_running(pid):
        return False
    if any(a.startswith("--type=") for a in cmdline):
        return False
    return f"--user-data-dir={profile}" in cmdline


def read_singleton_lock(profile: Path) -> tuple[str, int] | None:
    """``(hostname, pid)`` from the profile's ``SingletonLock`` symlink, if any."""
    try:
        target = os.readlink(profile / "SingletonLock")
    except FileNotFoundError:
        return None
    except OSError:
        # Exists but is not a symlink: not a format we know; let the caller decide.
        return ("", -1)
    host, _, pid_text = target.rpartition("-")
    if not pid_text.isdigit():
        return ("", -1)
    return (host, int(pid_text))


def find_browser_pid(profile: Path) -> int | None:
    """The pid of the browser main process running on ``profile``, verified via /proc."""
    lock = read_singleton_lock(profile)
    if lock is not None and lock[1] > 0 and is_main_browser_of(lock[1], profile):
        return lock[1]
    # The lock can be missing or odd (another Chromium build); scan /proc instead.
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    for entry in proc.iterdir():
        if entry.name.isdigit() and is_main_browser_of(int(entry.name), profile):
            return int(entry.name)
    return None


def check_profile_free(profile: Path) -> None:
    """Raise :class:`ProfileInUse` if a live browser holds ``profile``; clear a stale lock.

    Chromium marks a profile in use with a ``SingletonLock`` symlink to
    ``<hostname>-<pid>``. The lock is *live* when it names this host and a running
    browser process; a lock naming another host cannot be checked and counts as live
    (the message says how to remove it). A lock whose process is gone (a SIGKILLed
    browser leaves one) or is now some unrelated process is stale: it and its
    companions (``SingletonSocket``, ``SingletonCookie``) are deleted.
    """
    lock = read_singleton_lock(profile)
    if lock is None:
        return
    host, pid = lock
    lock_path = profile / "SingletonLock"
    if pid <= 0:
        raise ProfileInUse(
            f"profile directory {profile} has a SingletonLock in an unknown format; "
            f"if no browser uses this profile, delete {lock_path}"
        )
    if host != socket.gethostname():
        raise ProfileInUse(
            f"profile directory {profile} is locked by a browser on host {host!r} (pid {pid}); "
            f"if no browser uses this profile, delete {lock_path}"
        )
    if pid_running(pid) and looks_like_browser(pid):
        raise ProfileInUse(f"profile directory {profile} is in use by a live browser (pid {pid})")
    for name in SINGLETON_FILES:
        with contextlib.suppress(FileNotFoundError):
            (profile / name).unlink()
    log.info("removed a stale browser lock from %s (pid %d is gone)", profile, pid)
