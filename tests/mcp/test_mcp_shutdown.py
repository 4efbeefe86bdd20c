"""``session-keeper mcp`` stopped by Ctrl-C (SIGINT) or SIGTERM while serving a client:
no traceback, exit status 0, its browser closed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from session_keeper._browser.process import find_browser_pid
from session_keeper.mcp import TokenFile
from session_keeper.testing import LocalSites

from .conftest import ROOT, call, free_port, server_args, text, token_http

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(180)]

SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]

#: Runs the server with the client's stdin and stdout, its stderr to $ERR; writes its pid
#: to $PIDF and, when it ends, its exit status to $RCF (the official client owns the pipes,
#: so the status is read here).
_WRAPPER = (
    'exec 3<&0; "$0" -m session_keeper.mcp "$@" 0<&3 2>"$ERR" & '
    'echo $! > "$PIDF"; wait $!; echo $? > "$RCF"'
)


def _wait_for(path: Path, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path.name} was never written")


def _browser_closed(profile: Path, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while find_browser_pid(profile) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("sig", SIGNALS)
async def test_a_stdio_server_stopped_by_a_signal_exits_0_without_a_traceback(
    tmp_path: Path, sites: LocalSites, chromium_path: str, sig: signal.Signals
) -> None:
    """A client connected, a page open; the signal: exit 0, empty stderr but the start-up
    line, Chromium closed (not orphaned)."""
    profile = tmp_path / "profile"
    files = {name: tmp_path / name for name in ("ERR", "PIDF", "RCF")}
    params = StdioServerParameters(
        command="/bin/sh",
        args=[
            "-c",
            _WRAPPER,
            sys.executable,
            *server_args(profile, sites, chromium_path, "--conversation", "billing"),
        ],
        cwd=str(ROOT),
        env={**os.environ, **{k: str(v) for k, v in files.items()}},
    )
    async with Client(params) as client:
        opened = await call(client, "browser_navigate", {"url": sites.url("docs.example", "/")})
        assert not opened.is_error, text(opened)
        os.kill(int(_wait_for(files["PIDF"])), sig)
        status = await asyncio.to_thread(_wait_for, files["RCF"])
    stderr = files["ERR"].read_text()
    assert status == "0", stderr
    assert "Traceback" not in stderr, stderr
    assert stderr.splitlines()[0].startswith("session-keeper mcp: serving on stdio")
    assert _browser_closed(profile)


@pytest.mark.parametrize("sig", SIGNALS)
async def test_an_http_server_stopped_by_a_signal_with_a_client_connected_exits_0_quietly(
    tmp_path: Path, sites: LocalSites, chromium_path: str, sig: signal.Signals
) -> None:
    """Over --http, a token client holding its session open; the signal: exit 0, no
    traceback, Chromium closed."""
    profile = tmp_path / "profile"
    tokens = TokenFile(tmp_path / "tokens.json")
    token = tokens.add(["billing"])[1]
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "session_keeper.mcp",
        *server_args(profile, sites, chromium_path),
        "--http", f"127.0.0.1:{port}", "--tokens", str(tokens.path),
        cwd=str(ROOT), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        for _ in range(600):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                assert proc.returncode is None, "the MCP server exited"
                await asyncio.sleep(0.05)
                continue
            writer.close()
            await writer.wait_closed()
            break
        async with token_http(url, token) as client:
            opened = await call(client, "browser_navigate", {"url": sites.url("docs.example", "/")})
            assert not opened.is_error, text(opened)
            proc.send_signal(sig)
            _, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stderr = err.decode()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    assert _browser_closed(profile)
