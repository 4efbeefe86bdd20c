"""Rows 10, 29, 30: navigate + snapshot rounds through our MCP server vs Playwright MCP.

    python benchmarks/mcp_round.py [--rounds 15] [--gallery-rounds 15]

Both servers run on stdio, driven by the same client (the Python ``mcp`` SDK's
``Client``), launch the same Chromium (``find_chromium()``) headless with the same
extra flags, and read the same local page (``docs.example`` pages of
:class:`~session_keeper.testing.LocalSites`, alternating two URLs so every navigate
really navigates). A round is ``browser_navigate`` then ``browser_snapshot``; rounds
alternate which server goes first. Ours runs with its Guard and answers with restart
facts and grants; theirs (``@playwright/mcp`` from npm, installed once into
``~/.cache/session-keeper-bench``) runs with its defaults, ``--no-sandbox`` because
this may run as root (Playwright passes the same flag to ours).

Rows 29 and 30: the same rounds on row 9's page, signed in, with 40 subresources
(``billing.example``'s ``/gallery``: 40 PNG images of the signed-in site), each server
signed in through its own tools (``browser_navigate``, ``browser_type``,
``browser_click``). Ours holds a grant on the site and has recorded the login
(``browser_record_login``), so its Guard enforces it; it is compared with Playwright MCP
enforcing its own allowlist (``--allowed-origins`` naming the site: its routing sees
every request; row 29) and with Playwright MCP's defaults (no enforcement at all; row
30, reported). ``--gallery-rounds 0`` leaves rows 29 and 30 out, ``--rounds 0`` row 10.

When npm or the package is unavailable the row is printed as not measured, with why.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
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
GALLERY_ALLOWLIST = (
    "browser_navigate + browser_snapshot on a signed-in page with 40 subresources: ours "
    "(Guard, a grant) vs @playwright/mcp --allowed-origins"
)
GALLERY_DEFAULTS = (
    "browser_navigate + browser_snapshot on a signed-in page with 40 subresources: ours "
    "(Guard, a grant) vs @playwright/mcp defaults (no enforcement)"
)
BILLING = "billing.example"
SUBRESOURCES = 40


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


def _pythonpath() -> str:
    """This checkout first, then what the caller's PYTHONPATH adds (a profiler's hooks)."""
    extra = os.environ.get("PYTHONPATH")
    return os.pathsep.join([str(ROOT), *([extra] if extra else [])])


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


def _ref(snapshot: str, line_has: str) -> str:
    """The ``[ref=...]`` of the snapshot line that contains ``line_has``."""
    for line in snapshot.splitlines():
        if line_has in line and "[ref=" in line:
            return line.split("[ref=", 1)[1].split("]", 1)[0]
    raise RuntimeError(f"no ref for {line_has!r} in: {snapshot[:300]}")


async def sign_in(client: Client, sites: LocalSites, *, record: bool) -> None:
    """Sign in to billing.example through the server's own tools (and record the login)."""
    await client.call_tool("browser_navigate", {"url": sites.url(BILLING, "/login")})
    form = text_of(await client.call_tool("browser_snapshot", {}))
    for label, value in (("Username", "alice"), ("Password", "correct horse")):
        ref = _ref(form, f'textbox "{label}"')
        typed = await client.call_tool(
            "browser_type", {"element": label, "ref": ref, "target": ref, "text": value}
        )
        if typed.is_error:
            raise RuntimeError(f"typing {label} answered: {text_of(typed)[:300]}")
    ref = _ref(form, 'button "Sign in"')
    await client.call_tool("browser_click", {"element": "Sign in", "ref": ref, "target": ref})
    if record:  # before another navigation to the site moves the sign-in's baseline
        recorded = await client.call_tool("browser_record_login", {"site": BILLING})
        if recorded.is_error:
            raise RuntimeError(f"record_login answered: {text_of(recorded)[:300]}")
    check = await client.call_tool("browser_navigate", {"url": sites.url(BILLING, "/invoices")})
    if "Sign in required" in text_of(check):
        raise RuntimeError(f"the sign-in did not take: {text_of(check)[:300]}")


async def interleaved(
    clients: dict[str, Client], pages: list[tuple[str, str]], rounds: int, warm: int = 2
) -> dict[str, list[float]]:
    """Each client's round times, rounds interleaved (every order of the clients in turn)."""
    for client in clients.values():  # warm-up: browser launch, first paint
        for url, expect in pages * warm:
            await one_round(client, url, expect)
    names = list(clients)
    orders = list(itertools.permutations(names))
    times: dict[str, list[float]] = {name: [] for name in names}
    for n in range(rounds):
        url, expect = pages[n % 2]
        for name in orders[n % len(orders)]:
            times[name].append(await one_round(clients[name], url, expect))
        said = ", ".join(f"{name} {times[name][-1] * 1e3:.1f} ms" for name in names)
        print(f"round {n + 1}: {said}", flush=True)
    return times


def _ratios(times: dict[str, list[float]], ours: str, theirs: str) -> list[float]:
    return [a / b for a, b in zip(times[ours], times[theirs], strict=True)]


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.1f} ms"


async def run(rounds: int, version: str, gallery_rounds: int = 15) -> None:
    """Start both servers, warm them up, measure interleaved rounds, emit the row."""
    try:
        cli, installed = install_playwright_mcp(version)
    except (Unavailable, OSError, subprocess.TimeoutExpired) as exc:
        why = f"@playwright/mcp unavailable: {exc}"
        for row, compared, wanted in (
            ("10", COMPARED, rounds),
            ("29", GALLERY_ALLOWLIST, gallery_rounds),
            ("30", GALLERY_DEFAULTS, gallery_rounds),
        ):
            if wanted > 0:
                emit_unmeasured(row, compared=compared, reason=why)
        return
    node = shutil.which("node")
    assert node is not None
    chromium = find_chromium()
    times: dict[str, list[float]] = {}
    gallery: dict[str, list[float]] = {}
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
            env={**os.environ, "PYTHONPATH": _pythonpath()},
        )  # fmt: skip
        pages = [(sites.url("docs.example", "/guide"), "Start with ensure()"),
                 (sites.url("docs.example", "/api"), "ensure, tab, decide")]  # fmt: skip
        if rounds > 0:
            async with Client(ours) as our_client, Client(theirs) as their_client:
                clients = {"ours": our_client, "theirs": their_client}
                times = await interleaved(clients, pages, rounds)
        if gallery_rounds > 0:
            gallery = await gallery_times(sites, tmp, node, cli, chromium, ours, gallery_rounds)
    if rounds > 0:
        emit(
            "10",
            compared=COMPARED,
            ratios=_ratios(times, "ours", "theirs"),
            goal=1.0,
            direction="<=",
            detail=(
                f"ours {_ms(times['ours'])}, {PACKAGE} {installed} {_ms(times['theirs'])} "
                "(medians; theirs with its default settings)"
            ),
        )
    if gallery_rounds <= 0:
        return
    emit(
        "29",
        compared=GALLERY_ALLOWLIST,
        ratios=_ratios(gallery, "ours", "allowlist"),
        goal=1.0,
        direction="<=",
        detail=(
            f"ours {_ms(gallery['ours'])}, {PACKAGE} {installed} --allowed-origins "
            f"{_ms(gallery['allowlist'])} (medians; {SUBRESOURCES} PNG images of the "
            "signed-in site)"
        ),
    )
    emit(
        "30",
        compared=GALLERY_DEFAULTS,
        ratios=_ratios(gallery, "ours", "theirs"),
        goal=None,
        direction="<=",
        detail=(
            f"ours {_ms(gallery['ours'])}, {PACKAGE} {installed} defaults "
            f"{_ms(gallery['theirs'])}, with --allowed-origins {_ms(gallery['allowlist'])} "
            f"(medians; their allowlist costs them "
            f"{statistics.median(_ratios(gallery, 'allowlist', 'theirs')):.2f}x)"
        ),
    )


async def gallery_times(
    sites: LocalSites,
    tmp: Path,
    node: str,
    cli: Path,
    chromium: str,
    ours: StdioServerParameters,
    rounds: int,
) -> dict[str, list[float]]:
    """The rounds on the signed-in gallery: ours (a grant, the login recorded), Playwright
    MCP with ``--allowed-origins`` and with its defaults, each server signed in first."""
    rules = sites.host_resolver_rules
    origin = sites.url(BILLING, "/").rstrip("/")
    servers: dict[str, StdioServerParameters] = {
        "ours": StdioServerParameters(
            command=ours.command,
            args=[*[a.replace("our-profile", "our-gallery-profile") for a in ours.args],
                  "--grant", BILLING],
            cwd=ours.cwd,
            env=ours.env,
        ),
    }  # fmt: skip
    for name, extra in (("allowlist", ["--allowed-origins", origin]), ("theirs", [])):
        config = tmp / f"pw-mcp-{name}.json"
        config.write_text(
            playwright_mcp_config(chromium, rules, tmp / f"{name}-gallery-profile"),
            encoding="utf-8",
        )
        servers[name] = StdioServerParameters(
            command=node,
            args=[str(cli), "--config", str(config), "--no-sandbox",
                  "--output-dir", str(tmp / f"out-{name}"), *extra],
            cwd=str(tmp),
        )  # fmt: skip
    path = f"/gallery?n={SUBRESOURCES}&img=png"
    pages = [(sites.url(BILLING, f"{path}&v=1"), "Gallery"),
             (sites.url(BILLING, f"{path}&v=2"), "Gallery")]  # fmt: skip
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(Client(params))
            for name, params in servers.items()
        }
        for name, client in clients.items():
            await sign_in(client, sites, record=name == "ours")
        return await interleaved(clients, pages, rounds)


def main() -> None:
    """Parse options and run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument(
        "--gallery-rounds", type=int, default=15, help="rounds on the 40-subresource page"
    )
    parser.add_argument(
        "--version", default=DEFAULT_VERSION, help=f"the {PACKAGE} version to install"
    )
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.version, args.gallery_rounds))


if __name__ == "__main__":
    main()
