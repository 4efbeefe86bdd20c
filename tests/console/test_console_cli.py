"""``session-keeper console --store URL``: a read-only console over what the store knows."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from session_keeper import Durability, Grant, SessionKeeper
from session_keeper.jobs import JobContract
from session_keeper.stores import SqliteStore
from session_keeper.testing import FakeBackend, FakeClock

ROOT = Path(__file__).resolve().parents[2]


async def _store_with_a_worker(db: Path) -> None:
    """What a worker process leaves in the store: its keeper document and a job."""
    async with SqliteStore(db) as store:
        backend = FakeBackend()
        keeper = SessionKeeper(
            backend,
            clock=FakeClock(),
            durability=Durability(store=store, keeper_id="worker-7"),
            grants=[Grant("billing", "billing.example")],
        )
        async with keeper:
            await keeper.ensure("billing")
            await keeper.tab("billing", "https://billing.example/login")
            await backend.sign_in("billing.example")
            await keeper.record_login("billing", "billing.example", account="alice")
        await store.submit_job(JobContract(job_id="audit-9", site="billing.example"))


def _console(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "session_keeper.cli", "console", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_the_cli_console_shows_another_processs_keeper_from_the_store(
    tmp_path: Path,
) -> None:
    """Started on a store, it prints a one-time link; the pages list the worker's ledger
    and job (read-only: no approve or resume forms); SIGTERM stops it cleanly."""
    db = tmp_path / "agent.db"
    await _store_with_a_worker(db)
    proc = _console("--store", f"sqlite:///{db}", "--bind", "127.0.0.1:0", "--user", "dana")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.fullmatch(r"console: (http://127\.0\.0\.1:\d+)(/login\?code=\S+)\n", line)
        assert m is not None, line + (proc.stderr.read() if proc.poll() is not None else "")  # type: ignore[union-attr]
        token = proc.stdout.readline().removeprefix("bearer token: ").strip()
        async with httpx.AsyncClient(base_url=m.group(1)) as client:
            assert (await client.get(m.group(2))).status_code == 303
            logins = await client.get("/logins")
            assert "worker-7" in logins.text and "alice" in logins.text
            jobs = await client.get("/jobs")
            assert "audit-9" in jobs.text
            assert "/resume" not in jobs.text
            assert "live view" not in jobs.text
            state = await client.get("/api/state", headers={"Authorization": f"Bearer {token}"})
            assert state.json()["browsers"][0]["where"] == "another process (store)"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_the_cli_console_refuses_a_non_loopback_bind(tmp_path: Path) -> None:
    """--bind 0.0.0.0:... without --allow-remote: exit status 2, a message, nothing served."""
    proc = _console("--store", f"sqlite:///{tmp_path / 'x.db'}", "--bind", "0.0.0.0:0")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "loopback" in err
    assert out == ""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_the_cli_console_stopped_by_ctrl_c_or_sigterm_exits_0_without_a_traceback(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Serving a signed-in person, Ctrl-C (SIGINT) or SIGTERM: exit 0, nothing on stderr."""
    db = tmp_path / "agent.db"
    await _store_with_a_worker(db)
    proc = _console("--store", f"sqlite:///{db}", "--bind", "127.0.0.1:0")
    try:
        assert proc.stdout is not None
        m = re.fullmatch(
            r"console: (http://127\.0\.0\.1:\d+)(/login\?code=\S+)\n", proc.stdout.readline()
        )
        assert m is not None
        async with httpx.AsyncClient(base_url=m.group(1)) as client:
            assert (await client.get(m.group(2))).status_code == 303
            assert (await client.get("/jobs")).status_code == 200
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and err == "", err
