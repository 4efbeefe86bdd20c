"""Rows 23 and 24: 20 MCP clients on one profile vs ``@playwright/mcp --isolated``.

    python benchmarks/mcp_many_clients.py [--clients 20] [--rounds 5]

One persistent Playwright MCP profile serves one client; to serve 20 clients at once
Playwright MCP runs ``--isolated``: one browser, a fresh in-memory browser context per
HTTP client. Ours serves the 20 clients as 20 conversations of one keeper: one
Chromium on one persistent profile, one tab per conversation, each client sending its
own bearer token (``session-keeper mcp --http --tokens``). Both servers run at the same
time over streamable HTTP on loopback, launch the same Chromium (``find_chromium()``)
headless with the same extra flags, and are driven by the same client (the Python
``mcp`` SDK's ``Client`` over ``streamable_http_client``, one HTTP client per MCP
client). ``@playwright/mcp`` comes from npm, installed once into
``~/.cache/session-keeper-bench`` (see :mod:`benchmarks.mcp_round`), and runs with its
defaults and ``--no-sandbox`` (this may run as root; Playwright passes the same flag to
ours).

- Row **23** (latency): a round is every client of one server doing
  ``browser_navigate`` + ``browser_snapshot`` at once on ``docs.example`` pages of
  :class:`~session_keeper.testing.LocalSites` (each client alternates two URLs, half
  the clients on each); rounds alternate which server goes first and the two servers
  never run a round at the same time. The figure is the per-round ratio of the
  clients' median latency, ours / theirs; the detail gives the medians and p95 over
  every client's rounds.
- Row **24** (memory): total PSS (the ``Pss:`` of ``/proc/<pid>/smaps_rollup``) of the
  server process and every descendant (Python or node, Playwright's driver, Chromium
  and its helpers), once all clients are connected and each has loaded a page, sampled
  after the warm-up and after every round (both servers idle); the figure is the
  per-sample ratio ours / theirs. (Chromium's two crash handlers per browser re-parent
  themselves to init and are left out on both sides: about 2 MiB each, one browser a
  side.)

The 1-minute load average is printed during the run and given in both rows' detail.
When npm, the package, or its ``--isolated`` HTTP server does not work here, both rows
are printed as not measured, with why.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from benchmarks._report import emit, emit_unmeasured
from benchmarks.mcp_round import (
    DEFAULT_VERSION,
    PACKAGE,
    Unavailable,
    install_playwright_mcp,
    one_round,
    playwright_mcp_config,
)
from session_keeper import find_chromium
from session_keeper.mcp import TokenFile
from session_keeper.testing import LocalSites

ROOT = Path(__file__).resolve().parent.parent
LATENCY_ROW = "23"
MEMORY_ROW = "24"
START_TIMEOUT = 60.0


def compared(clients: int) -> tuple[str, str]:
    """What rows 23 and 24 compare, for ``clients`` clients."""
    what = f"{clients} MCP clients over HTTP: one keeper, one profile vs {PACKAGE} --isolated"
    return (
        f"{what}; navigate + snapshot per client, median latency",
        f"{what}; total PSS of each server and its browser",
    )


@dataclass
class Server:
    """One MCP server subprocess (its own session) and its HTTP clients' headers."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    headers: list[dict[str, str]]
    clients: list[Client] = field(default_factory=list)

    def log_tail(self) -> str:
        """The last lines of the server's output (for an error message)."""
        try:
            lines = self.log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "?"
        return " | ".join(lines[-5:]) or "(no output)"


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(name: str, cmd: Sequence[str], url: str, log: Path, cwd: Path, **env: str) -> Server:
    """Start ``cmd`` in its own session, its output into ``log``."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
    return Server(name=name, proc=proc, url=url, log=log, headers=[])


async def wait_listening(server: Server, port: int) -> None:
    """Return once ``port`` accepts connections; raise if the server exits or is too slow."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(
                f"{server.name} exited with {server.proc.returncode}: {server.log_tail()}"
            )
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError(f"{server.name} did not listen on {port} in {START_TIMEOUT:.0f} s")


def stop(server: Server) -> None:
    """SIGTERM the server, then SIGKILL whatever of its process tree is left after 15 s.

    (Playwright starts Chromium in a process group of its own, so the tree is taken by
    parent ids before the server goes.)
    """
    tree = {pid: started(pid) for pid in descendants(server.proc.pid)}
    if server.proc.poll() is None:
        server.proc.terminate()
        with suppress(subprocess.TimeoutExpired):
            server.proc.wait(timeout=15)
    for pid, when in tree.items():
        if when is not None and started(pid) == when:  # still that process, not a reused id
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    server.proc.wait()


def started(pid: int) -> str | None:
    """The process's start time (field 22 of ``/proc/<pid>/stat``), or ``None`` if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[19]


@asynccontextmanager
async def connected(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    """One MCP client on its own HTTP connection pool, sending ``headers``."""
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


# --- memory ------------------------------------------------------------------------------


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (from the parent ids in ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def pss_kib(pid: int) -> int | None:
    """The process's proportional set size in KiB, or ``None`` once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return 0


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return "?"


def tree_pss(root: int) -> tuple[int, dict[str, int]]:
    """Total PSS in KiB of ``root`` and its descendants, and how many processes per name."""
    total, names = 0, dict[str, int]()
    for pid in descendants(root):
        kib = pss_kib(pid)
        if kib is None:
            continue
        total += kib
        name = comm(pid)
        names[name] = names.get(name, 0) + 1
    return total, names


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


# --- the run -----------------------------------------------------------------------------


async def round_of(server: Server, pages: Sequence[tuple[str, str]], n: int) -> list[float]:
    """Every client of ``server`` does navigate + snapshot at once; each one's seconds."""
    calls = []
    for i, client in enumerate(server.clients):
        url, expect = pages[(n + i) % len(pages)]
        calls.append(one_round(client, url, expect))
    return list(await asyncio.gather(*calls))


def p95(values: Sequence[float]) -> float:
    if len(values) < 2:
        return max(values)
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def describe(names: dict[str, int]) -> str:
    return ", ".join(f"{k} ×{v}" for k, v in sorted(names.items(), key=lambda kv: -kv[1]))


async def run(clients: int, rounds: int, warmup: int, version: str) -> None:
    """Start both servers, connect the clients, warm up, measure interleaved rounds, emit."""
    latency_what, memory_what = compared(clients)
    try:
        cli, installed = install_playwright_mcp(version)
    except (Unavailable, OSError, subprocess.TimeoutExpired) as exc:
        for row, what in ((LATENCY_ROW, latency_what), (MEMORY_ROW, memory_what)):
            emit_unmeasured(row, compared=what, reason=f"{PACKAGE} unavailable: {exc}")
        return
    node = shutil.which("node")
    assert node is not None
    chromium = find_chromium()
    loads = [load()]
    print(f"load average at start: {loads[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-mcp20-") as tmp_name, LocalSites() as sites:
        tmp = Path(tmp_name)
        rules = sites.host_resolver_rules
        pages = [(sites.url("docs.example", "/guide"), "Start with ensure()"),
                 (sites.url("docs.example", "/api"), "ensure, tab, decide")]  # fmt: skip

        tokens = TokenFile(tmp / "tokens.json")
        our_port = free_port()
        ours = start(
            "ours",
            [sys.executable, "-m", "session_keeper.mcp",
             "--http", f"127.0.0.1:{our_port}", "--tokens", str(tokens.path),
             "--profile", str(tmp / "our-profile"), "--executable", chromium,
             "--host-resolver-rules", rules],
            f"http://127.0.0.1:{our_port}/mcp", tmp / "ours.log", ROOT,
            PYTHONPATH=str(ROOT),
        )  # fmt: skip
        for i in range(clients):
            entry, token = tokens.add([f"c{i + 1:02d}"], name=f"bench-{i + 1:02d}")
            assert entry.conversations == (f"c{i + 1:02d}",) and token, entry
            ours.headers.append({"Authorization": f"Bearer {token}"})

        config = playwright_mcp_config(chromium, rules)
        (tmp / "pw-mcp.json").write_text(config, encoding="utf-8")
        their_port = free_port()
        theirs = start(
            "theirs",
            [node, str(cli), "--port", str(their_port), "--host", "127.0.0.1",
             "--allowed-hosts", f"127.0.0.1:{their_port}", "--isolated",
             "--config", str(tmp / "pw-mcp.json"), "--no-sandbox",
             "--output-dir", str(tmp / "out")],
            f"http://127.0.0.1:{their_port}/mcp", tmp / "theirs.log", tmp,
        )  # fmt: skip
        theirs.headers = [{} for _ in range(clients)]
        servers = {"ours": ours, "theirs": theirs}
        try:
            async with AsyncExitStack() as stack:
                await wait_listening(ours, our_port)
                for headers in ours.headers:
                    ours.clients.append(
                        await stack.enter_async_context(connected(ours.url, headers))
                    )
                # Warm-up: browser launch, each client's tab or context, first paints.
                for n in range(warmup):
                    await round_of(ours, pages, n)
                try:
                    await wait_listening(theirs, their_port)
                    for headers in theirs.headers:
                        theirs.clients.append(
                            await stack.enter_async_context(connected(theirs.url, headers))
                        )
                    for n in range(warmup):
                        await round_of(theirs, pages, n)
                except Exception as exc:  # their --isolated HTTP server does not work here
                    reason = (
                        f"{PACKAGE} {installed} --isolated over HTTP failed: "
                        f"{type(exc).__name__}: {exc}; log: {theirs.log_tail()}"
                    )
                    for row, what in ((LATENCY_ROW, latency_what), (MEMORY_ROW, memory_what)):
                        emit_unmeasured(row, compared=what, reason=reason[:600])
                    return
                times: dict[str, list[list[float]]] = {"ours": [], "theirs": []}
                pss: dict[str, list[int]] = {"ours": [], "theirs": []}
                names: dict[str, dict[str, int]] = {}

                def sample() -> None:
                    for name, server in servers.items():
                        total, names[name] = tree_pss(server.proc.pid)
                        pss[name].append(total)
                    loads.append(load())
                    print(
                        f"PSS: ours {pss['ours'][-1] / 1024:.0f} MiB "
                        f"({sum(names['ours'].values())} processes), theirs "
                        f"{pss['theirs'][-1] / 1024:.0f} MiB "
                        f"({sum(names['theirs'].values())} processes); load {loads[-1]:.2f}",
                        flush=True,
                    )

                await asyncio.sleep(2)  # let both settle before the first PSS sample
                sample()
                for n in range(rounds):
                    order = ["ours", "theirs"] if n % 2 == 0 else ["theirs", "ours"]
                    for name in order:
                        times[name].append(await round_of(servers[name], pages, warmup + n))
                    print(
                        f"round {n + 1}: median ours "
                        f"{statistics.median(times['ours'][-1]) * 1e3:.0f} ms, theirs "
                        f"{statistics.median(times['theirs'][-1]) * 1e3:.0f} ms",
                        flush=True,
                    )
                    await asyncio.sleep(1)
                    sample()
                # Closing 40 sessions at once, the SDK's SSE reader may log a notification
                # that arrived after its stream closed: teardown noise, not a result.
                logging.getLogger("mcp.client.streamable_http").setLevel(logging.CRITICAL)
        finally:
            for server in servers.values():
                stop(server)
    print(f"processes: ours: {describe(names['ours'])}; theirs: {describe(names['theirs'])}")
    ratios = [
        statistics.median(a) / statistics.median(b)
        for a, b in zip(times["ours"], times["theirs"], strict=True)
    ]
    flat = {name: [t for r in per_round for t in r] for name, per_round in times.items()}
    load_range = f"load average {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} CPUs"
    emit(
        LATENCY_ROW,
        compared=latency_what,
        ratios=ratios,
        goal=1.0,
        direction="<=",
        detail=(
            f"per client round: ours median {statistics.median(flat['ours']) * 1e3:.0f} ms, "
            f"p95 {p95(flat['ours']) * 1e3:.0f} ms; {PACKAGE} {installed} median "
            f"{statistics.median(flat['theirs']) * 1e3:.0f} ms, p95 "
            f"{p95(flat['theirs']) * 1e3:.0f} ms ({clients} clients × {rounds} rounds; "
            f"theirs with its defaults; {load_range})"
        ),
    )
    emit(
        MEMORY_ROW,
        compared=memory_what,
        ratios=[a / b for a, b in zip(pss["ours"], pss["theirs"], strict=True)],
        goal=1.0,
        direction="<=",
        detail=(
            f"ours {statistics.median(pss['ours']) / 1024:.0f} MiB in "
            f"{sum(names['ours'].values())} processes, {PACKAGE} {installed} "
            f"{statistics.median(pss['theirs']) / 1024:.0f} MiB in "
            f"{sum(names['theirs'].values())} processes (medians of {len(pss['ours'])} "
            f"samples, {clients} clients each on a page; {load_range})"
        ),
    )


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds per server")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured rounds first")
    parser.add_argument(
        "--version", default=DEFAULT_VERSION, help=f"the {PACKAGE} version to install"
    )
    args = parser.parse_args()
    if args.clients < 1 or args.rounds < 1 or args.warmup < 1:
        parser.error("--clients, --rounds and --warmup must be at least 1")
    asyncio.run(run(args.clients, args.rounds, args.warmup, args.version))


if __name__ == "__main__":
    main()
