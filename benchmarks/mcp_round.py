"""Row 10: a navigate + snapshot round through our MCP server vs Microsoft's Playwright MCP.

    python benchmarks/mcp_round.py [--rounds 15]

Both servers run on stdio, driven by the same client (the Python ``mcp`` SDK's
``Client``), launch the same Chromium (``find_chromium()``) headless with the same
extra flags, and read the same local page (``docs.example`` pages of
:class:`~session_keeper.testing.LocalSites`, alternating two URLs so every navigate
really navigates). A round is ``browser_navigate`` then ``browser_snapshot``; rounds
alternate which server goes first. Ours runs with its Guard and answers with restart
facts and grants; theirs (``@playwright/mcp`` from npm, installed once into
``~/.cache/session-keeper-bench``) runs with its defaults, ``--no-sandbox`` because
this may run as root (Playwright passes the same flag to ours).

When npm or the package is unavailable the row is printed as not measured, with why.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from benchmarks._report import emit, emit_unmeasured
from session_keeper import find_chromium
from session_keeper._browser.chromium import CHROMIUM_ARGS
from session_keeper.testing import LocalSites

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "@playwright/mcp"
# The version compared by default: the one Playwright MCP's own suite was run against here
# (scripts/playwright_mcp_suite.py); "latest" can name a build whose playwright alpha the
# registry does not have yet (npm ETARGET), and then the row goes unmeasured.
DEFAULT_VERSION = "0.0.83"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "session-keeper-bench"
COMPARED = "browser_navigate + browser_snapshot: our MCP server vs @playwright/mcp, same client"


class Unavailable(Exception):
    """Playwright MCP cannot be installed or run here (the message says why)."""


def install_playwright_mcp(version: str) -> tuple[Path, str]:
    """The path of ``@playwright/mcp``'s ``cli.js`` (installed with npm once) and its version."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise Unavailable("node/npm is not installed on this machine")
    prefix = CACHE / f"playwright-mcp-{version}"
    cli = prefix / "node_modules" / "@playwright" / "mcp" / "cli.js"
    if not cli.exists() or version == "latest":
        prefix.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             f"{PACKAGE}@{version}"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if not cli.exists():  # a failed refresh of an installed copy keeps that copy
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            raise Unavailable(f"`npm install {PACKAGE}@{version}` failed: {tail[0]}")
    meta = json.loads((cli.parent / "package.json").read_text(encoding="utf-8"))
    return cli, str(meta["version"])


def playwright_mcp_config(chromium: str, rules: str, profile: Path | None = None) -> str:
    """Playwright MCP's JSON config for the same Chromium, headless, on the local sites."""
    browser: dict[str, Any] = {
        "browserName": "chromium",
        "launchOptions": {
            "executablePath": chromium,
            "headless": True,
            "chromiumSandbox": False,
            "args": [*CHROMIUM_ARGS, f"--host-resolver-rules={rules}"],
        },
    }
    if profile is not None:
        browser["userDataDir"] = str(profile)
    return json.dumps({"browser": browser})


def text_of(result: Any) -> str:
    """The text content of a tool result."""
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def one_round(client: Client, url: str, expect: str) -> float:
    """Seconds for browser_navigate(url) + browser_snapshot; checks both reached the page."""
    start = time.perf_counter()
    nav = await client.call_tool("browser_navigate", {"url": url})
    snap = await client.call_tool("browser_snapshot", {})
    took = time.perf_counter() - start
    # (Playwright MCP may put the navigate's snapshot in a file; the snapshot is inline.)
    if nav.is_error or url not in text_of(nav):
        raise RuntimeError(f"navigate to {url} answered: {text_of(nav)[:300]}")
    if snap.is_error or expect not in text_of(snap):
        raise RuntimeError(f"snapshot of {url} answered: {text_of(snap)[:300]}")
    return took


async def run(rounds: int, version: str) -> None:
    """Start both servers, warm them up, measure interleaved rounds, emit the row."""
    try:
        cli, installed = install_playwright_mcp(version)
    except (Unavailable, OSError, subprocess.TimeoutExpired) as exc:
        emit_unmeasured("10", compared=COMPARED, reason=f"@playwright/mcp unavailable: {exc}")
        return
    node = shutil.which("node")
    assert node is not None
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp_name, LocalSites() as sites:
        tmp = Path(tmp_name)
        rules = sites.host_resolver_rules
        config = playwright_mcp_config(chromium, rules, tmp / "theirs-profile")
        (tmp / "pw-mcp.json").write_text(config, encoding="utf-8")
        theirs = StdioServerParameters(
            command=node,
            args=[str(cli), "--config", str(tmp / "pw-mcp.json"), "--no-sandbox",
                  "--output-dir", str(tmp / "out")],
            cwd=str(tmp),
        )  # fmt: skip
        ours = StdioServerParameters(
            command=sys.executable,
            args=["-m", "session_keeper.mcp", "--profile", str(tmp / "our-profile"),
                  "--executable", chromium, "--host-resolver-rules", rules,
                  "--conversation", "bench"],
            cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        pages = [(sites.url("docs.example", "/guide"), "Start with ensure()"),
                 (sites.url("docs.example", "/api"), "ensure, tab, decide")]  # fmt: skip
        async with Client(ours) as our_client, Client(theirs) as their_client:
            clients = {"ours": our_client, "theirs": their_client}
            for client in clients.values():  # warm-up: browser launch, first paint
                for url, expect in pages * 2:
                    await one_round(client, url, expect)
            times: dict[str, list[float]] = {"ours": [], "theirs": []}
            for n in range(rounds):
                url, expect = pages[n % 2]
                order = ["ours", "theirs"] if n % 2 == 0 else ["theirs", "ours"]
                for name in order:
                    times[name].append(await one_round(clients[name], url, expect))
                print(
                    f"round {n + 1}: ours {times['ours'][-1] * 1e3:.1f} ms, "
                    f"theirs {times['theirs'][-1] * 1e3:.1f} ms",
                    flush=True,
                )
    ratios = [a / b for a, b in zip(times["ours"], times["theirs"], strict=True)]
    emit(
        "10",
        compared=COMPARED,
        ratios=ratios,
        goal=1.0,
        direction="<=",
        detail=(
            f"ours {statistics.median(times['ours']) * 1e3:.1f} ms, "
            f"{PACKAGE} {installed} {statistics.median(times['theirs']) * 1e3:.1f} ms "
            "(medians; theirs with its default settings)"
        ),
    )


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--version", default=DEFAULT_VERSION, help=f"the {PACKAGE} version to install"
    )
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.version))


if __name__ == "__main__":
    main()
