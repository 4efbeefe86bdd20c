"""A Chromium started as a separate process (a provider's stand-in) and a cuttable TCP proxy."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import tempfile
from pathlib import Path

from session_keeper.testing import CHROMIUM_TEST_ARGS

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--remote-debugging-port=0",
)


class RemoteChromium:
    """Chromium on its own profile with ``--remote-debugging-port=0``; not ours to launch."""

    def __init__(self, executable: str, host_resolver_rules: str) -> None:
        self.executable = executable
        self.host_resolver_rules = host_resolver_rules
        self._dir = tempfile.TemporaryDirectory(prefix="remote-chromium-")
        self.profile = Path(self._dir.name)
        self.process: asyncio.subprocess.Process | None = None
        self.port = 0

    async def start(self) -> int:
        """Start the browser and return its DevTools port (from DevToolsActivePort)."""
        active = self.profile / "DevToolsActivePort"
        with contextlib.suppress(FileNotFoundError):
            active.unlink()
        self.process = await asyncio.create_subprocess_exec(
            *[
                self.executable,
                *FLAGS,
                *CHROMIUM_TEST_ARGS,
                f"--host-resolver-rules={self.host_resolver_rules}",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(300):
            if active.exists():
                first = active.read_text().splitlines()[:1]
                if first and first[0].isdigit():
                    self.port = int(first[0])
                    return self.port
            if self.process.returncode is not None:
                break
            await asyncio.sleep(0.05)
        raise RuntimeError("remote Chromium did not publish its DevTools port")

    async def kill(self) -> None:
        """SIGKILL the browser's process group and wait for it."""
        proc, self.process = self.process, None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()

    async def restart_fresh(self) -> int:
        """Kill it and start a new browser process on a fresh profile (a new browser)."""
        await self.kill()
        self._dir.cleanup()
        self._dir = tempfile.TemporaryDirectory(prefix="remote-chromium-")
        self.profile = Path(self._dir.name)
        return await self.start()

    async def stop(self) -> None:
        await self.kill()
        self._dir.cleanup()


class CutProxy:
    """A loopback TCP proxy to ``upstream_port`` whose connections the test can cut."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.open = True

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        for src, dst in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.get_running_loop().create_task(self._pipe(src, dst))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            dst.close()
            self._writers.discard(dst)

    def cut(self) -> None:
        """Close every connection and refuse new ones until :meth:`restore`."""
        self.open = False
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    def restore(self) -> None:
        self.open = True

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
