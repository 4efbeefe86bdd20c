"""A browser the keeper did not launch, reached over CDP: a cut socket and our own restart.

Starts its own Chromium with ``--remote-debugging-port`` on loopback (the stand-in for a
hosted browser's CDP URL) behind a small TCP proxy it can cut, and the local fixture
sites. Then:

1. **A cut socket is not a restart.** A keeper opens a tab, the proxy drops every
   connection for a moment; the keeper reconnects to the same browser and the next
   ``ensure()`` says ``restarted=False``, with the same tab.
2. **Our own process restarts, the browser lives on.** A keeper *process* signs in to
   billing and opens a tab for two conversations, then is SIGKILLed. A new keeper on
   the same store and endpoint re-binds: no restart, both tabs back (same target ids),
   the login survived (to re-validate before a side effect).

Usage: ``python demos/remote_browser.py``. The last line is ``RESULT ...``; exits 1 if a
guarantee did not hold.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import session_keeper
from session_keeper import (
    CdpBackend,
    Durability,
    Grant,
    LoginSettings,
    SessionKeeper,
    find_chromium,
)
from session_keeper._browser.chromium import CHROMIUM_ARGS
from session_keeper.stores import SqliteStore
from session_keeper.testing import CHROMIUM_TEST_ARGS, LocalSites

KEY = bytes(range(32))
GRANTS = [Grant("billing", "billing.example")]


class CuttableProxy:
    """Loopback TCP proxy to the browser's DevTools port; :meth:`cut` drops every connection."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.open = True
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        self._writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except OSError:
            pass
        finally:
            dst.close()

    def cut(self) -> None:
        self.open = False
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()


async def start_chromium(profile: str, rules: str) -> tuple[asyncio.subprocess.Process, int]:
    """Chromium on ``profile`` with a DevTools port on loopback; returns it and the port."""
    proc = await asyncio.create_subprocess_exec(
        find_chromium(),
        "--headless",
        # As Playwright launches it (its default): a container running as root has no
        # usable sandbox.
        "--no-sandbox",
        *CHROMIUM_ARGS,
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        *CHROMIUM_TEST_ARGS,
        f"--host-resolver-rules={rules}",
        f"--user-data-dir={profile}",
        "about:blank",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    active = Path(profile) / "DevToolsActivePort"
    for _ in range(600):
        lines = active.read_text().splitlines() if active.exists() else []
        if lines and lines[0].isdigit():
            return proc, int(lines[0])
        await asyncio.sleep(0.05)
    raise RuntimeError("Chromium did not publish its DevTools port")


async def until(condition: Callable[[], bool], limit: float = 20.0) -> None:
    for _ in range(int(limit / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise RuntimeError("timed out")


async def cut_is_not_a_restart(proxy: CuttableProxy, sites: LocalSites) -> tuple[bool, str]:
    backend = CdpBackend(proxy.url)
    async with SessionKeeper(backend, login_settings=LoginSettings(fingerprint_key=KEY)) as keeper:
        await keeper.ensure("research")
        page = await keeper.unguarded_page("research", sites.url("docs.example", "/guide"))
        session = backend.current
        assert session is not None
        proxy.cut()
        await asyncio.sleep(0.2)
        proxy.open = True
        await until(lambda: session.reconnects == 1 or not session.alive)
        facts = await keeper.ensure("research")
        same_tab = await keeper.unguarded_page("research") is page
        print(f"cut:    restarted={facts.restarted} same_tab={same_tab} url={page.url}")
        ok = not facts.restarted and same_tab and backend.launches == 1
        return ok, f"cut_restarted={facts.restarted} cut_same_tab={same_tab}"


async def keeper_process(db: str, endpoint: str, billing: str, docs: str) -> None:
    """The first keeper process: sign in, open two tabs, save, say READY, wait to be killed."""
    backend = CdpBackend(endpoint)
    async with SqliteStore(Path(db)) as store:
        keeper = SessionKeeper(
            backend,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=GRANTS,
        )
        await keeper.ensure("billing")
        page = await keeper.unguarded_page("billing", billing + "/login")
        await page.fill("input[name=username]", "alice")
        await page.fill("input[name=password]", "correct horse")
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        await keeper.record_login("billing", "billing.example", account="alice")
        tabs = {"billing": await keeper.unguarded_page("billing", billing + "/invoices")}
        await keeper.ensure("research")
        tabs["research"] = await keeper.unguarded_page("research", docs + "/guide")
        await keeper.persist()
        assert backend.current is not None
        targets = {c: backend.current.target_id(p) for c, p in tabs.items()}
        print("READY " + json.dumps(targets), flush=True)
        await asyncio.sleep(3600)


async def process_restart_rebinds(
    proxy: CuttableProxy, sites: LocalSites, db: Path
) -> tuple[bool, str]:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--keeper-process",
        str(db),
        proxy.url,
        sites.url("billing.example", "").rstrip("/"),
        sites.url("docs.example", "").rstrip("/"),
        stdout=subprocess.PIPE,
        # The child runs the same session_keeper as this process.
        env={**os.environ, "PYTHONPATH": str(Path(session_keeper.__file__).parents[1])},
    )
    assert child.stdout is not None
    try:
        line = (await asyncio.wait_for(child.stdout.readline(), 120)).decode()
    finally:
        if child.returncode is None:
            child.send_signal(signal.SIGKILL)
        await child.wait()
    targets = json.loads(line.removeprefix("READY "))
    print(f"kill:   keeper process {child.pid} SIGKILLed with 2 tabs and a login")

    backend = CdpBackend(proxy.url)
    async with (
        SqliteStore(db) as store,
        SessionKeeper(
            backend,
            durability=Durability(store=store),
            login_settings=LoginSettings(fingerprint_key=KEY),
            grants=GRANTS,
        ) as keeper,
    ):
        billing = await keeper.ensure("billing")
        research = await keeper.ensure("research")
        assert backend.current is not None
        readopted = 0
        for conversation in ("billing", "research"):
            page = await keeper.unguarded_page(conversation)
            readopted += backend.current.target_id(page) == targets[conversation]
        (login,) = keeper.logins() or (None,)
        survived = login is not None and login.needs_revalidation
        print(
            f"rebind: restarted={billing.restarted or research.restarted} "
            f"tabs_readopted={readopted} login_survived={survived} "
            f"revalidate={','.join(billing.revalidate)}"
        )
        restarted = billing.restarted or research.restarted
        ok = not restarted and readopted == 2 and survived and backend.launches == 0
        login_fate = "survived" if survived else "lost"
        return ok, f"rebind_restarted={restarted} tabs_readopted={readopted} login={login_fate}"


async def main() -> int:
    with (
        LocalSites() as sites,
        tempfile.TemporaryDirectory(prefix="sk-remote-") as tmp,
    ):
        profile = os.path.join(tmp, "profile")
        browser, port = await start_chromium(profile, sites.host_resolver_rules)
        proxy = CuttableProxy(port)
        await proxy.start()
        try:
            cut_ok, cut = await cut_is_not_a_restart(proxy, sites)
            rebind_ok, rebind = await process_restart_rebinds(proxy, sites, Path(tmp) / "keeper.db")
        finally:
            await proxy.stop()
            os.killpg(browser.pid, signal.SIGKILL)
            await browser.wait()
    print(f"RESULT {cut} {rebind}")
    return 0 if cut_ok and rebind_ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--keeper-process"]:
        asyncio.run(keeper_process(*sys.argv[2:6]))
    else:
        sys.exit(asyncio.run(main()))
