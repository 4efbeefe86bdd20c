"""Run Playwright MCP's own test suite against ``@playwright/mcp`` and/or ``session-keeper mcp``.

Microsoft's tests for Playwright MCP live in the Playwright monorepo
(``tests/mcp/*.spec.ts``, fixtures in ``tests/mcp/fixtures.ts``). This script prepares them in
a temporary directory at run time (nothing from Playwright is copied into this repository):

1. exports ``tests/{mcp,config,assets,third_party}`` from a Playwright checkout (``--playwright
   DIR``) or, by default, from ``HEAD`` of the local mirror with ``git archive``;
2. installs ``@playwright/mcp`` (``--mcp-version``) from npm, plus the ``playwright`` it depends
   on and the few test dependencies, and links ``packages/playwright-core`` and
   ``packages/playwright-test`` to the npm packages so the suite's imports resolve without
   building the monorepo (``@playwright/test`` is a local shim over that ``playwright``);
3. patches the temporary copy of ``fixtures.ts``: the MCP server command comes from the
   ``PWSUITE_SERVER`` environment variable, browsers the fixtures launch themselves (the CDP
   tests) use ``--chromium``, and a server that dies at start-up gets its last stderr lines
   into the error; then writes a one-project (chromium), one-worker config;
4. runs the specs with one worker against each server and prints spec -> passed/failed, plus
   the first line of every failure.

Servers: ``theirs`` is ``node @playwright/mcp/cli.js --executable-path CHROMIUM --no-sandbox``
followed by the suite's arguments. ``ours`` is ``session-keeper mcp --profile <fresh dir>
--executable CHROMIUM`` followed by the suite's arguments, run twice by default: ``as-is``
(every argument passed through) and ``dropped`` (long options ``session-keeper mcp --help``
does not list are removed, with their values).

Usage::

    python scripts/playwright_mcp_suite.py --server both \\
        --specs core,click,tabs,wait,type,autowait,capabilities,screenshot,snapshot,dialogs,\\
console,evaluate,form,find

Options worth knowing: ``--ours-args as-is|dropped|both``; ``--ours-extra ARGS`` (options
for ours before the suite's, e.g. ``'--action-snapshots file'``); ``--ours-source DIR``
(run ours from that checkout, e.g. a clean worktree, instead of whatever ``session-keeper``
imports);
``--workdir DIR --keep`` (keep the prepared tree, and in ``DIR/results`` the JSON reports, the
runner logs and ``failures-<server>.txt`` with every failure's full message; a second run with
the same ``--workdir`` reuses the preparation); ``--chromium /usr/bin/chromium``;
``--session-keeper PATH``. Needs node and npm with access to the npm registry. A spec name
without a file (``snapshot``) runs the closest file (``snapshot-mode.spec.ts``), and the
substitution is printed. The JSON reporter's numbers are the source: a test counts as passed
when Playwright says expected (or flaky), failed when unexpected or timed out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MIRROR = Path("/work/.mirror/microsoft+playwright/repo")
DEFAULT_SPECS = (
    "core,click,tabs,wait,type,autowait,capabilities,screenshot,snapshot,dialogs,console,"
    "evaluate,form,find"
)
EXPORTED = ("tests/mcp", "tests/config", "tests/assets", "tests/third_party", "tests/tsconfig.json")
TEST_DEPS = ("@modelcontextprotocol/sdk", "debug", "dotenv", "mime", "ws")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
WRAP_FLAG = "--wrap"

FIXTURE_PATCHES: tuple[tuple[str, str], ...] = (
    # The option array is shared between calls; copy it so extra args never accumulate.
    ("let args: string[] = mcpArgs ?? [];", "let args: string[] = [...(mcpArgs ?? [])];"),
    (
        "    command: 'node',\n"
        "    args: [...(mcpServerType === 'test-mcp' ? testMcpServerPath : mcpServerPath), "
        "...options.args],",
        "    command: pwsuiteServer ? pwsuiteServer[0] : 'node',\n"
        "    args: pwsuiteServer ? [...pwsuiteServer.slice(1), ...options.args] : "
        "[...(mcpServerType === 'test-mcp' ? testMcpServerPath : mcpServerPath), "
        "...options.args],",
    ),
    # Browsers the fixtures launch themselves (CDP and launchServer tests): the given Chromium.
    (
        "          channel: mcpBrowser,\n",
        "          channel: mcpBrowser,\n          executablePath: process.env.PWSUITE_CHROMIUM,\n",
    ),
    (
        "await chromium.launchServer();",
        "await chromium.launchServer({ executablePath: process.env.PWSUITE_CHROMIUM });",
    ),
    # A server that exits at start-up says why on stderr; put that in the error.
    (
        "      await client.connect(transport);\n      await client.ping();\n",
        "      try {\n"
        "        await client.connect(transport);\n"
        "        await client.ping();\n"
        "      } catch (e) {\n"
        "        await new Promise(resolve => setTimeout(resolve, 300));\n"
        "        e.message += ' [server stderr: ' + "
        "stderrBuffer.trim().split('\\n').slice(-2).join(' | ') + ']';\n"
        "        throw e;\n"
        "      }\n",
    ),
    (
        "  const profilesDir = test.info().outputPath('ms-playwright');",
        "  const profilesDir = test.info().outputPath('ms-playwright');\n"
        "  const pwsuiteServer: string[] | undefined = process.env.PWSUITE_SERVER ? "
        "JSON.parse(process.env.PWSUITE_SERVER) : undefined;",
    ),
)

CONFIG_TS = """\
import { defineConfig } from '@playwright/test';
import type { TestOptions } from './fixtures';

process.env.PWTEST_UNDER_TEST = '1';

const metadata = { platform: process.platform, headless: 'headless', mode: 'default',
  video: false };

export default defineConfig<TestOptions>({
  testDir: __dirname,
  fullyParallel: false,
  workers: 1,
  retries: 0,
  timeout: 30000,
  outputDir: process.env.PWSUITE_OUTPUT_DIR,
  reporter: [['list'], ['json', { outputFile: process.env.PWSUITE_JSON }]],
  projects: [
    { name: 'chromium', use: { mcpBrowser: 'chromium' },
      metadata: { ...metadata, browserName: 'chromium' }, testDir: __dirname },
  ],
});
"""

SHIM_FILES = {
    "index.js": "module.exports = require('playwright/test');\n",
    "index.mjs": "export * from 'playwright/test';\nexport { default } from 'playwright/test';\n",
    "index.d.ts": "export * from 'playwright/test';\n",
    "reporter.js": "module.exports = require('playwright/reporter');\n",
    "reporter.mjs": "export * from 'playwright/reporter';\n",
    "cli.js": "#!/usr/bin/env node\nrequire('playwright/cli');\n",
}


@dataclass
class Outcome:
    """One test's result."""

    title: str
    status: str
    message: str = ""


@dataclass
class SpecResult:
    """One spec file's results for one server."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[Outcome] = field(default_factory=list)


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[pwsuite {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``cmd``; raise with its output when it fails."""
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


# --- wrapper mode: the suite starts this script as the MCP server command -------------------


def long_options(help_text: str) -> dict[str, bool]:
    """Long options listed by an argparse ``--help``, mapped to whether they take a value."""
    options: dict[str, bool] = {}
    for match in re.finditer(
        r"(?<![\w-])(--[a-z][a-z0-9-]*)(?:[ =]([A-Z][A-Z0-9_:\[\]]*))?", help_text
    ):
        name, metavar = match.group(1), match.group(2)
        options[name] = options.get(name, False) or bool(metavar)
    return options


def drop_unknown(args: list[str], known: dict[str, bool]) -> tuple[list[str], list[str]]:
    """Split ``args`` into those ``known`` lists and the dropped rest (unknown options' values
    go with them: an unknown ``--opt`` followed by a non-option drops both)."""
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0]
        takes_value = known.get(name)
        if name.startswith("--") and takes_value is not None:
            kept.append(arg)
            if takes_value and "=" not in arg and i + 1 < len(args):
                kept.append(args[i + 1])
                i += 1
        elif arg.startswith("-"):
            dropped.append(arg)
            if "=" not in arg and i + 1 < len(args) and not args[i + 1].startswith("-"):
                dropped.append(args[i + 1])
                i += 1
        else:
            dropped.append(arg)
        i += 1
    return kept, dropped


def wrap(spec_json: str, args: list[str]) -> None:
    """Exec ``session-keeper mcp`` with a fresh profile, passing (or filtering) ``args``."""
    spec: dict[str, Any] = json.loads(spec_json)
    profiles = Path(spec["profiles"])
    profiles.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="profile-", dir=profiles)
    if spec.get("known") is not None:
        args, dropped = drop_unknown(args, spec["known"])
        if dropped:
            print(f"pwsuite: dropped {dropped}", file=sys.stderr, flush=True)
    extra = spec.get("extra", [])
    argv = [spec["exe"], "mcp", "--profile", profile, "--executable", spec["chromium"], *extra]
    argv += args
    os.execve(argv[0], argv, ours_env(spec.get("source")))


def ours_env(source: str | None) -> dict[str, str]:
    """The environment for ``session-keeper``: ``source`` (a checkout) first on the path."""
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    return env


# --- preparing the suite ---------------------------------------------------------------------


def export_playwright(source: Path | None, mirror: Path, dest: Path) -> str:
    """Put Playwright's MCP tests and their helpers under ``dest``; return what was used."""
    if source is not None:
        for rel in EXPORTED:
            src = source / rel
            if src.is_dir():
                shutil.copytree(src, dest / rel, symlinks=True)
            elif src.exists():
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / rel)
        return f"{source} (checkout)"
    commit = run(["git", "-C", str(mirror), "rev-parse", "HEAD"], dest).strip()
    archive = dest / "export.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", "-C", str(mirror), "archive", "--format=tar", commit, *EXPORTED],
            stdout=out,
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    version = json.loads(run(["git", "-C", str(mirror), "show", f"{commit}:package.json"], dest))[
        "version"
    ]
    return f"{mirror} HEAD {commit} (version {version})"


def dev_dependency_versions(source: Path | None, mirror: Path, cwd: Path) -> dict[str, str]:
    """Versions the monorepo pins for the test dependencies (unpinned when unknown)."""
    try:
        if source is not None:
            package = json.loads((source / "package.json").read_text())
        else:
            package = json.loads(run(["git", "-C", str(mirror), "show", "HEAD:package.json"], cwd))
    except (OSError, ValueError, SystemExit):
        package = {}
    pins: dict[str, str] = package.get("devDependencies", {})
    return {name: pins.get(name, "latest") for name in TEST_DEPS}


def install(dest: Path, mcp_version: str, deps: dict[str, str]) -> dict[str, str]:
    """npm-install ``@playwright/mcp``, its ``playwright``, a ``@playwright/test`` shim over it
    and the test dependencies; link ``packages/``. Return the versions installed."""
    (dest / "package.json").write_text(json.dumps({"name": "pwsuite", "private": True}))
    view = run(["npm", "view", f"@playwright/mcp@{mcp_version}", "dependencies", "--json"], dest)
    playwright_version: str = json.loads(view)["playwright"]
    shim = dest / "shim" / "playwright-test"
    shim.mkdir(parents=True)
    for name, text in SHIM_FILES.items():
        (shim / name).write_text(text)
    (shim / "package.json").write_text(
        json.dumps(
            {
                "name": "@playwright/test",
                "version": playwright_version,
                "main": "index.js",
                "exports": {
                    ".": {
                        "types": "./index.d.ts",
                        "import": "./index.mjs",
                        "require": "./index.js",
                        "default": "./index.js",
                    },
                    "./cli": "./cli.js",
                    "./package.json": "./package.json",
                    "./reporter": {
                        "import": "./reporter.mjs",
                        "require": "./reporter.js",
                        "default": "./reporter.js",
                    },
                },
            }
        )
    )
    env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    packages = [
        f"@playwright/mcp@{mcp_version}",
        f"playwright@{playwright_version}",
        "./shim/playwright-test",
        *(f"{name}@{ver}" for name, ver in deps.items()),
    ]
    log(f"npm install {' '.join(packages)}")
    run(["npm", "install", "--no-audit", "--no-fund", *packages], dest, env)
    (dest / "packages").mkdir()
    (dest / "packages" / "playwright-core").symlink_to(dest / "node_modules" / "playwright-core")
    (dest / "packages" / "playwright-test").symlink_to(dest / "node_modules" / "playwright")
    versions = {}
    for name in ("@playwright/mcp", "playwright", "playwright-core", *TEST_DEPS):
        meta = json.loads((dest / "node_modules" / name / "package.json").read_text())
        versions[name] = meta["version"]
    return versions


def patch_fixture(dest: Path) -> None:
    """Let ``PWSUITE_SERVER`` choose the server command (temporary copy only)."""
    fixture = dest / "tests" / "mcp" / "fixtures.ts"
    text = fixture.read_text()
    for old, new in FIXTURE_PATCHES:
        if old not in text:
            raise SystemExit(f"fixtures.ts changed upstream; cannot find:\n{old}")
        text = text.replace(old, new, 1)
    fixture.write_text(text)
    (dest / "tests" / "mcp" / "pwsuite.config.ts").write_text(CONFIG_TS)


def resolve_specs(dest: Path, names: list[str]) -> list[tuple[str, str]]:
    """Map each spec name to a file name in ``tests/mcp`` (the closest one when missing)."""
    mcp = dest / "tests" / "mcp"
    resolved: list[tuple[str, str]] = []
    for name in names:
        exact = mcp / f"{name}.spec.ts"
        if exact.exists():
            resolved.append((name, exact.name))
            continue
        close = sorted(p.name for p in mcp.glob(f"{name}*.spec.ts"))
        close = close or sorted(
            p.name for p in mcp.glob(f"*{name}*.spec.ts") if not p.name.startswith("cli-")
        )
        if not close:
            log(f"no spec file for {name!r}; skipped")
            continue
        log(f"no {name}.spec.ts; using the closest, {close[0]}")
        resolved.append((name, close[0]))
    return resolved


# --- running ---------------------------------------------------------------------------------


def server_command(
    kind: str,
    dest: Path,
    chromium: str,
    session_keeper: str,
    source: str | None,
    extra: list[str] | None = None,
) -> list[str]:
    """The command prefix the patched fixture starts (the suite's args follow it)."""
    if kind == "theirs":
        cli = dest / "node_modules" / "@playwright" / "mcp" / "cli.js"
        return ["node", str(cli), f"--executable-path={chromium}", "--no-sandbox"]
    known: dict[str, bool] | None = None
    if kind == "ours-dropped":
        help_text = run([session_keeper, "mcp", "--help"], dest, ours_env(source))
        known = long_options(help_text)
    spec = {
        "exe": session_keeper,
        "chromium": chromium,
        "profiles": str(dest / "profiles" / kind),
        "known": known,
        "source": source,
        "extra": extra or [],
    }
    return [sys.executable, str(Path(__file__).resolve()), WRAP_FLAG, json.dumps(spec)]


def first_line(message: str) -> str:
    """The first non-empty line of an error message, without colours; for a diff, also its
    first expected (-) and received (+) lines."""
    lines = [line for line in ANSI.sub("", message).splitlines() if line.strip()]
    if not lines:
        return ""
    summary = lines[0].strip()
    # A toEqual diff: its first changed key on each side (not the "- Expected" header or the
    # "- ObjectContaining {" wrapper).
    minus = next((x for x in lines if x.startswith(("-   ", '- "', "- -"))), "")
    plus = next((x for x in lines if x.startswith(("+   ", '+ "', "+ -"))), "")
    for line in lines[1:4]:
        if line.startswith(("Expected", "Received")):
            summary += " " + line.strip()
    if minus or plus:
        summary += f" {minus.strip()[:160]} {plus.strip()[:160]}"
    return summary


def collect(report: dict[str, Any]) -> dict[str, SpecResult]:
    """Per spec file, the outcomes in a Playwright JSON report."""
    results: dict[str, SpecResult] = {}

    def walk(suite: dict[str, Any], titles: list[str]) -> None:
        for spec in suite.get("specs", []):
            file_name = Path(spec.get("file", suite.get("file", ""))).name
            entry = results.setdefault(file_name, SpecResult())
            for test in spec.get("tests", []):
                status = test.get("status", "")
                runs = test.get("results", [])
                message = ""
                for result in runs:
                    errors = result.get("errors") or []
                    if errors:
                        message = "\n".join(e.get("message", "") for e in errors)
                        break
                    if result.get("error"):
                        message = result["error"].get("message", "")
                        break
                outcome = Outcome(" > ".join([*titles, spec["title"]]), status, message)
                if status in ("expected", "flaky"):
                    entry.passed += 1
                elif status == "skipped":
                    entry.skipped += 1
                else:
                    entry.failed += 1
                    entry.failures.append(outcome)
        for child in suite.get("suites", []):
            walk(child, [*titles, child["title"]])

    for suite in report.get("suites", []):
        walk(suite, [])
    return results


def run_suite(
    kind: str, chromium: str, dest: Path, files: list[str], command: list[str], results_dir: Path
) -> tuple[dict[str, SpecResult], float]:
    """Run the specs against one server; return per-spec results and the wall time."""
    report_file = results_dir / f"{kind}.json"
    env = {
        **os.environ,
        "PWSUITE_SERVER": json.dumps(command),
        "PWSUITE_JSON": str(report_file),
        # Two levels below dest, like tests/mcp: the fixture passes --config relative to the
        # config's directory while the server's cwd is the test's output directory.
        "PWSUITE_OUTPUT_DIR": str(dest / f"test-results-{kind}"),
        "PWSUITE_CHROMIUM": chromium,
        "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
        "FORCE_COLOR": "0",
    }
    env.pop("CI", None)
    cmd = [
        "node",
        str(dest / "node_modules" / "playwright" / "cli.js"),
        "test",
        "--config",
        str(dest / "tests" / "mcp" / "pwsuite.config.ts"),
        "--workers=1",
        "--project=chromium",
        # Full paths: a bare "core.spec.ts" is a pattern that also matches cli-core.spec.ts.
        *(str(dest / "tests" / "mcp" / f) for f in files),
    ]
    log(f"running {kind}: {len(files)} spec files")
    started = time.monotonic()
    with (results_dir / f"{kind}.log").open("w") as out:
        subprocess.run(
            cmd,
            cwd=dest / "tests" / "mcp",
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    elapsed = time.monotonic() - started
    if not report_file.exists():
        raise SystemExit(f"no report from the {kind} run; see {results_dir / (kind + '.log')}")
    return collect(json.loads(report_file.read_text())), elapsed


def print_table(specs: list[tuple[str, str]], runs: dict[str, dict[str, SpecResult]]) -> None:
    """Spec -> passed/failed(/skipped) for each server."""
    kinds = list(runs)
    width = max(len(f"{n} ({f})") for n, f in specs) + 2
    print("spec".ljust(width) + "".join(k.ljust(18) for k in kinds))
    totals = {k: SpecResult() for k in kinds}
    for name, file_name in specs:
        label = name if file_name == f"{name}.spec.ts" else f"{name} ({file_name})"
        row = label.ljust(width)
        for kind in kinds:
            result = runs[kind].get(file_name, SpecResult())
            totals[kind].passed += result.passed
            totals[kind].failed += result.failed
            totals[kind].skipped += result.skipped
            cell = f"{result.passed}/{result.passed + result.failed}"
            if result.skipped:
                cell += f" ({result.skipped} skip)"
            row += cell.ljust(18)
        print(row)
    row = "TOTAL".ljust(width)
    for kind in kinds:
        t = totals[kind]
        row += f"{t.passed}/{t.passed + t.failed}".ljust(18)
    print(row)


def print_failures(
    specs: list[tuple[str, str]], runs: dict[str, dict[str, SpecResult]], results_dir: Path
) -> None:
    """Each failing test's first error line; full messages go to ``failures-<kind>.txt``."""
    for kind, per_spec in runs.items():
        lines: list[str] = []
        full: list[str] = []
        for _, file_name in specs:
            for outcome in per_spec.get(file_name, SpecResult()).failures:
                lines.append(
                    f"  {file_name} :: {outcome.title} [{outcome.status}]\n"
                    f"      {first_line(outcome.message)}"
                )
                full.append(
                    f"=== {file_name} :: {outcome.title} [{outcome.status}]\n"
                    f"{ANSI.sub('', outcome.message)}\n"
                )
        (results_dir / f"failures-{kind}.txt").write_text("\n".join(full))
        print(f"\nFailures, {kind} ({len(lines)}):")
        print("\n".join(lines) if lines else "  none")


def main(argv: list[str]) -> int:
    """Entry point."""
    if argv[:1] == [WRAP_FLAG]:
        wrap(argv[1], argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--playwright",
        type=Path,
        help="a checkout or export of microsoft/playwright (default: git archive HEAD of --mirror)",
    )
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR)
    parser.add_argument("--specs", default=DEFAULT_SPECS, help="comma-separated spec names")
    parser.add_argument("--server", choices=("ours", "theirs", "both"), default="both")
    parser.add_argument(
        "--ours-args",
        choices=("as-is", "dropped", "both"),
        default="both",
        help="pass the suite's options to ours as they are, drop the ones "
        "ours does not list, or run both ways",
    )
    parser.add_argument(
        "--ours-extra",
        default="",
        metavar="ARGS",
        help="options for ours before the suite's own, e.g. '--action-snapshots file'",
    )
    parser.add_argument("--mcp-version", default="0.0.83", help="@playwright/mcp from npm")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    sibling = Path(sys.executable).with_name("session-keeper")
    parser.add_argument(
        "--session-keeper",
        default=str(sibling)
        if sibling.exists()
        else shutil.which("session-keeper") or "session-keeper",
        help="the session-keeper executable",
    )
    parser.add_argument(
        "--ours-source",
        help="run ours from this checkout (put first on "
        "PYTHONPATH), e.g. a clean worktree, instead of what session-keeper "
        "imports by default",
    )
    parser.add_argument("--workdir", type=Path, help="prepare here (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    opts = parser.parse_args(argv)

    started = time.monotonic()
    dest = opts.workdir or Path(tempfile.mkdtemp(prefix="pwsuite-"))
    dest.mkdir(parents=True, exist_ok=True)
    results_dir = dest / "results"
    try:
        if not (dest / "node_modules").exists():
            source = export_playwright(opts.playwright, opts.mirror, dest)
            deps = dev_dependency_versions(opts.playwright, opts.mirror, dest)
            versions = install(dest, opts.mcp_version, deps)
            patch_fixture(dest)
            (dest / "prepared.json").write_text(
                json.dumps({"source": source, "versions": versions})
            )
        prepared = json.loads((dest / "prepared.json").read_text())
        results_dir.mkdir(exist_ok=True)
        print(f"tests from: {prepared['source']}")
        print("npm: " + ", ".join(f"{k} {v}" for k, v in prepared["versions"].items()))
        print(f"chromium: {run([opts.chromium, '--version'], dest).strip()}")
        if opts.server in ("ours", "both"):
            env = ours_env(opts.ours_source)
            version = run([opts.session_keeper, "mcp", "--version"], dest, env).strip()
            where = opts.ours_source or "the installed package"
            print(f"ours: {opts.session_keeper} ({version}), code from {where}")
            if opts.ours_extra:
                print(f"ours runs with: {opts.ours_extra}")
        specs = resolve_specs(dest, [s.strip() for s in opts.specs.split(",") if s.strip()])
        kinds = ["theirs"] if opts.server in ("theirs", "both") else []
        if opts.server in ("ours", "both"):
            kinds += {
                "as-is": ["ours-as-is"],
                "dropped": ["ours-dropped"],
                "both": ["ours-as-is", "ours-dropped"],
            }[opts.ours_args]
        runs: dict[str, dict[str, SpecResult]] = {}
        for kind in kinds:
            command = server_command(
                kind,
                dest,
                opts.chromium,
                opts.session_keeper,
                opts.ours_source,
                shlex.split(opts.ours_extra),
            )
            runs[kind], elapsed = run_suite(
                kind, opts.chromium, dest, [f for _, f in specs], command, results_dir
            )
            log(f"{kind} took {elapsed:.0f} s")
        print()
        print_table(specs, runs)
        print_failures(specs, runs, results_dir)
        print(f"\nwall time {time.monotonic() - started:.0f} s; reports in {results_dir}")
    finally:
        if not opts.keep and opts.workdir is None:
            shutil.rmtree(dest, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
