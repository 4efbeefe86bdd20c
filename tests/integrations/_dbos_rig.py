"""The DBOS recovery tests' application processes (``_dbos_process.py``): start one, read
what it prints, wait for what the test sites' logs show."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs

from demos.sites import DemoSites

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("_dbos_process.py")


def walked_pages(sites: DemoSites, tag: str) -> list[int]:
    """The guide pages of walk ``tag`` the docs site served, in order (its own log)."""
    out = []
    for r in sites.requests("docs.example"):
        query = parse_qs(r.query)
        if r.path == "/guide" and query.get("walk") == [tag]:
            out.append(int(query["page"][0]))
    return out


def refund_posts(sites: DemoSites, billing: str, workflow_id: str) -> int:
    """The refund POSTs billing received under ``workflow_id``'s idempotency keys."""
    return sum(
        1
        for r in sites.requests(billing)
        if r.method == "POST"
        and r.path == "/refund"
        and parse_qs(r.query).get("idempotency_key", [""])[0].startswith(workflow_id + ":")
    )


def spawn(args: list[str]) -> subprocess.Popen[str]:
    """An application machine: the script in its own interpreter and process group."""
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its Chromium dies with it, as on a machine that died
    )


def wait_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 120) -> str:
    """The rest of the first stdout line starting with ``prefix`` (stderr on failure)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
        if not line and proc.poll() is not None:
            break
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    raise AssertionError(f"no {prefix!r} line:\n{err[-3000:]}")


def until(check: Callable[[], bool], what: str, timeout: float = 90) -> None:
    """Poll ``check`` every 20 ms until true (a failure names ``what``)."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)
