"""The first hour without a traceback: each mistake a newcomer makes with the command is
one line on stderr naming the fix, and exit status 2, before anything says it serves.

Every test runs ``session-keeper`` as a subprocess, as a shell or an MCP client does.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

import session_keeper
from session_keeper import Grant, PlaywrightBackend
from session_keeper._browser.playwright import KEEPER_LOCK_NAME
from session_keeper._util.version import package_version
from session_keeper.errors import BrowserLaunchError, InvalidArgument, StoreError
from session_keeper.mcp._preflight import ServerHold
from session_keeper.stores import PostgresStore, SqliteStore
from session_keeper.testing import TemporaryPostgres

ROOT = Path(__file__).resolve().parents[1]

#: A store open given this long to connect (the pool used to retry for all of it, then
#: say only PoolTimeout) ...
CONNECT_TIMEOUT_S = 30.0
#: ... must fail well inside it: a refusal is known in one round trip. Measured in-process,
#: where a loaded machine's interpreter start-up does not count.
OPEN_BOUND_S = CONNECT_TIMEOUT_S / 3


async def _open_fails(dsn: str, says: str) -> float:
    """Seconds a PostgresStore open took to fail with ``says`` in its StoreError."""
    store = PostgresStore(dsn, connect_timeout=CONNECT_TIMEOUT_S)
    started = time.monotonic()
    with pytest.raises(StoreError, match=re.escape(says)):
        await store.open()
    return time.monotonic() - started


def command(
    *argv: str, env: Mapping[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``session-keeper ARGV`` as a subprocess whose stdin pipe is closed at once (an MCP
    client that left)."""
    return subprocess.run(
        [sys.executable, "-m", "session_keeper.cli", *argv],
        cwd=ROOT,
        env=dict(os.environ if env is None else env),
        input="",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def refused(done: subprocess.CompletedProcess[str], prog: str = "session-keeper mcp") -> str:
    """The one error line of a refused start (asserting it is one line, exit 2, a fix)."""
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    line = done.stderr.rstrip("\n")
    assert line.startswith(f"{prog}: error: "), line
    assert re.search(r"\(fix: [^)]", line), f"no fix named: {line}"
    assert "Traceback" not in line and "serving" not in line
    return line


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_store_in_a_missing_directory_is_named_with_the_mkdir_to_run(tmp_path: Path) -> None:
    """``--store nodir/agent.db``: the missing directory is named, with the fix, and
    nothing is created."""
    store = tmp_path / "nodir" / "agent.db"
    line = refused(command("mcp", "--profile", str(tmp_path / "p"), "--store", str(store)))
    assert f"directory {store.parent} does not exist" in line
    assert f"mkdir -p {store.parent}" in line
    assert not store.parent.exists()


@pytest.mark.parametrize("place", ["under-a-file", "proc"])
def test_a_store_where_nothing_can_be_written_is_named(tmp_path: Path, place: str) -> None:
    """A store under a regular file, or in /proc (unwritable even for root), is refused
    at start with the place named and the fix; no traceback."""
    if place == "under-a-file":
        (tmp_path / "a-file").write_text("")
        store = tmp_path / "a-file" / "agent.db"
    else:
        store = Path("/proc") / f"sk-{os.getpid()}.db"
    line = refused(command("mcp", "--profile", str(tmp_path / "p"), "--store", str(store)))
    assert str(store.parent) in line
    if place == "under-a-file":
        assert "is not a directory" in line
    else:
        assert "this user may" in line


def test_a_postgres_dsn_where_nothing_listens_fails_fast_with_the_servers_reason(
    tmp_path: Path,
) -> None:
    """A DSN on a port where nothing listens: "Connection refused", at once (not the
    connect timeout's worth of pool retries ending in PoolTimeout), and the fix."""
    dsn = f"postgresql://agent:hunter2-secret@127.0.0.1:{_free_port()}/agents"
    line = refused(command("mcp", "--profile", str(tmp_path / "p"), "--store", dsn))
    assert "Connection refused" in line and "PoolTimeout" not in line
    assert "start PostgreSQL" in line
    assert "hunter2-secret" not in line
    took = asyncio.run(_open_fails(dsn, "Connection refused"))
    assert took < OPEN_BOUND_S, f"the open took {took:.1f} s"


@pytest.mark.postgres
def test_a_postgres_server_that_refuses_says_why_in_its_own_words(
    pg_server: TemporaryPostgres, tmp_path: Path
) -> None:
    """A database that does not exist on a live server: the server's own sentence, at once,
    for the MCP server and for the console alike."""
    dsn = pg_server.create_database().rsplit("/", 1)[0] + "/no_such_database"
    line = refused(command("mcp", "--profile", str(tmp_path / "p"), "--store", dsn))
    assert 'database "no_such_database" does not exist' in line
    took = asyncio.run(_open_fails(dsn, 'database "no_such_database" does not exist'))
    assert took < OPEN_BOUND_S, f"the open took {took:.1f} s"
    line = refused(command("console", "--store", dsn), prog="session-keeper console")
    assert 'database "no_such_database" does not exist' in line


def test_a_profile_that_is_a_file_is_refused_at_start(tmp_path: Path) -> None:
    """``--profile`` naming a file: refused at start, not at the first tool call."""
    profile = tmp_path / "profile"
    profile.write_text("not a directory")
    line = refused(command("mcp", "--profile", str(profile)))
    assert f"--profile {profile} is a file, not a directory" in line


def test_a_profile_another_server_holds_is_refused_naming_it(tmp_path: Path) -> None:
    """A profile another server holds (its lock, held from another process): refused at
    start, naming that server's pid and the fix (one server over --http)."""
    profile = tmp_path / "p"
    profile.mkdir()
    hold = ServerHold.take(profile)
    try:
        line = refused(command("mcp", "--profile", str(profile)))
    finally:
        hold.release()
    assert f"held by another session-keeper mcp (pid {os.getpid()})" in line
    assert "--http" in line


def test_a_profile_a_session_keeper_browser_holds_is_refused(tmp_path: Path) -> None:
    """A profile whose browser a keeper in another process runs (its launch lock held)."""
    profile = tmp_path / "p"
    profile.mkdir()
    fd = os.open(profile / KEEPER_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        line = refused(command("mcp", "--profile", str(profile)))
    finally:
        os.close(fd)
    assert "in use by another session_keeper browser" in line


@pytest.mark.parametrize("how", ["--executable", "SESSION_KEEPER_CHROMIUM"])
def test_no_chromium_is_refused_at_start_with_how_to_install_one(tmp_path: Path, how: str) -> None:
    """A Chromium that is not there (given or configured): refused at start, naming it and
    how to install one."""
    missing = str(tmp_path / "no-such-chromium")
    env = dict(os.environ)
    argv = ["mcp", "--profile", str(tmp_path / "p")]
    if how == "--executable":
        argv += ["--executable", missing]
    else:
        env["SESSION_KEEPER_CHROMIUM"] = missing
    line = refused(command(*argv, env=env))
    assert missing in line
    assert "install" in line.split("(fix:")[1] or "--executable" in line.split("(fix:")[1]


def test_headed_without_a_display_is_refused_naming_the_three_ways_out(tmp_path: Path) -> None:
    """``--headed`` with neither $DISPLAY nor $WAYLAND_DISPLAY: drop it, sign in through
    --console, or run under xvfb-run."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    line = refused(command("mcp", "--profile", str(tmp_path / "p"), "--headed", env=env))
    fix = line.split("(fix:", 1)[1]
    assert "drop --headed" in fix and "--console" in fix and "xvfb-run" in fix


def test_a_console_port_in_use_is_refused_before_serving(tmp_path: Path) -> None:
    """``--console HOST:PORT`` on a port another program listens on: refused before the
    server says it serves."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused(
            command("mcp", "--profile", str(tmp_path / "p"), "--console", f"127.0.0.1:{port}")
        )
    assert f"--console 127.0.0.1:{port}" in line and "free port" in line


def test_an_http_port_in_use_is_refused_before_serving(tmp_path: Path) -> None:
    """``--http HOST:PORT`` on a port another program listens on: one line before the
    start-up line, not uvicorn's log and exit 1 after it."""
    tokens = tmp_path / "tokens.json"
    assert (
        command("mcp", "token", "add", "--tokens", str(tokens), "--conversation", "a").returncode
        == 0
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused(
            command(
                "mcp", "--profile", str(tmp_path / "p"), "--http", f"127.0.0.1:{port}",
                "--tokens", str(tokens),
            )
        )  # fmt: skip
    assert f"--http 127.0.0.1:{port}: cannot serve there" in line and "free port" in line


def test_the_console_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    """``session-keeper console --bind`` on a taken port: one line, exit 2, no traceback."""
    db = tmp_path / "agent.db"

    async def make() -> None:
        async with SqliteStore(db):
            pass

    asyncio.run(make())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = command("console", "--store", str(db), "--bind", f"127.0.0.1:{port}")
    line = refused(done, prog="session-keeper console")
    assert f"--bind 127.0.0.1:{port}: cannot serve there" in line


@pytest.mark.parametrize(
    ("grant", "says"),
    [
        ("billing.example:raed", "'raed' is not an action; the actions are read, write"),
        ("billing.example:read,wirte", "'wirte' is not an action"),
        ("billing:billing.example:raed", "'raed' is not an action"),
        ("https://billing.example/:raed", "'raed' is not an action"),
    ],
)
def test_a_grant_with_a_misspelt_action_names_the_actions(
    tmp_path: Path, grant: str, says: str
) -> None:
    """``--grant billing.example:raed`` is a misspelt action (the valid ones named), not
    a grant for a conversation called billing.example."""
    line = refused(command("mcp", "--profile", str(tmp_path / "p"), "--grant", grant))
    assert says in line
    assert "conversation" not in line
    assert "--grant" in line.split("(fix:", 1)[1]


@pytest.mark.parametrize(
    ("grant", "granted"),
    [
        ("https://billing.example/", "mcp may read/write billing.example"),
        ("https://billing.example:8443/invoices:read", "mcp may read billing.example"),
        ("mcp:https://billing.example/:write", "mcp may write billing.example"),
        ("billing.example:read", "mcp may read billing.example"),
    ],
)
def test_a_grant_written_as_a_url_is_for_that_site(
    tmp_path: Path, grant: str, granted: str
) -> None:
    """A grant written as a URL grants its host (not a conversation named "https"); the
    start-up line says so, and the server exits 0 when its client leaves."""
    done = command("mcp", "--profile", str(tmp_path / "p"), "--grant", grant)
    assert done.returncode == 0, done.stderr
    assert f"grants: {granted}\n" in done.stderr


@pytest.mark.parametrize("stdin", ["/dev/null", "a regular file"])
def test_a_stdio_server_whose_stdin_cannot_be_polled_ends_when_it_ends(
    tmp_path: Path, stdin: str
) -> None:
    """stdin at /dev/null (``< /dev/null``, a service unit) or a regular file ends the
    stdio server at once, exit 0, with no traceback: the event loop cannot wait on them,
    so the server reads them as the SDK does instead of hanging."""
    if stdin == "a regular file":
        source = tmp_path / "empty.jsonl"
        source.write_text("")
        stdin = str(source)
    with open(stdin, "rb") as fh:
        done = subprocess.run(
            [sys.executable, "-m", "session_keeper.cli", "mcp", "--profile", str(tmp_path / "p")],
            cwd=ROOT, stdin=fh, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr


def test_the_console_on_a_missing_store_is_one_line(tmp_path: Path) -> None:
    """``session-keeper console --store missing.db``: one line with the fix, nothing served,
    no store file made."""
    missing = tmp_path / "missing.db"
    line = refused(command("console", "--store", str(missing)), prog="session-keeper console")
    assert f"no store at {missing}" in line
    assert not missing.exists()


def test_store_inspection_takes_db_where_a_person_types_it(tmp_path: Path) -> None:
    """``session-keeper store ledger --db x`` and ``session-keeper ledger --db x`` work;
    without a store the one line says to add --db or --dsn."""
    db = tmp_path / "agent.db"
    for argv in (["store", "ledger", "--db", str(db)], ["ledger", "--db", str(db)]):
        line = refused(command(*argv), prog="session-keeper store")
        assert f"no store at {db}" in line  # parsed: the store itself is what is missing
    line = refused(command("store", "ledger"), prog="session-keeper store")
    assert "--db PATH" in line and "--dsn DSN" in line


def test_help_leads_with_the_servers_and_version_is_the_packages() -> None:
    """``session-keeper --help`` leads with mcp and console; ``--version`` and
    ``session_keeper.__version__`` are the installed distribution's version."""
    shown = command("--help").stdout
    assert shown.index("session-keeper mcp") < shown.index("session-keeper console")
    assert shown.index("session-keeper console") < shown.index("session-keeper store")
    assert "--db" not in shown.split("positional arguments")[1]
    version = command("--version").stdout.split()
    assert version == ["session-keeper", package_version()]
    assert session_keeper.__version__ == package_version()
    assert package_version() != "0+unknown"


def test_a_grant_with_a_misspelt_action_is_refused_when_made() -> None:
    """``Grant(actions=("raed",))`` raises InvalidArgument at once, naming the action it
    was meant to be; an action of the keeper's own (``delete``) is still a grant."""
    for slip, meant in (("raed", "read"), ("Write", "write"), ("reads", "read")):
        with pytest.raises(InvalidArgument, match=f"did you mean '{meant}'"):
            Grant("billing", "billing.example", actions=(slip,))
    assert Grant("billing", "billing.example", actions={"delete"}).actions == {"delete"}


@pytest.fixture
def fake_chromium(tmp_path: Path) -> Path:
    """Where a test writes a program that plays a Chromium failing to start."""
    return tmp_path / "chromium"


def _says(path: Path, stderr: str, status: int) -> Path:
    lines = "\n".join(f"echo {line!r} >&2" for line in stderr.splitlines())
    path.write_text(f"#!/bin/sh\n{lines}\nexit {status}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("stderr", "status", "fix"),
    [
        (
            "[9:9:1206/232529.523242:ERROR:ui/ozone/platform/x11/ozone_platform_x11.cc:257] "
            "Missing X server or $DISPLAY",
            1,
            "xvfb-run",
        ),
        (
            "chrome: error while loading shared libraries: libnss3.so: cannot open shared "
            "object file: No such file or directory",
            127,
            "install-deps",
        ),
        (
            "[9:9:1206/1.2:ERROR:zygote_host_impl_linux.cc:100] Running as root without "
            "--no-sandbox is not supported. See https://crbug.com/638180.",
            1,
            "root",
        ),
    ],
)
async def test_a_launch_failure_carries_chromiums_reason_and_the_fix(
    fake_chromium: Path, tmp_path: Path, stderr: str, status: int, fix: str
) -> None:
    """BrowserLaunchError quotes the tail of the browser's stderr (not the 60-flag command
    line) and the fix for a known cause."""
    backend = PlaywrightBackend(
        tmp_path / "profile", executable_path=_says(fake_chromium, stderr, status)
    )
    try:
        with pytest.raises(BrowserLaunchError) as info:
            await backend.launch()
    finally:
        await backend.aclose()
    said = str(info.value)
    assert "browser said: " in said and stderr.split("] ")[-1][:40] in said
    assert f"exitCode={status}" in said
    assert "fix: " in said and fix in said.split("fix: ", 1)[1]
    assert "--disable-background-networking" not in said


async def test_a_launch_failure_never_quotes_a_secret_from_chromiums_stderr(
    fake_chromium: Path, tmp_path: Path
) -> None:
    """A URL's query in the browser's stderr (a token, a code) is cut from the error."""
    stderr = "ERROR: could not load https://billing.example/callback?code=s3cr3t-t0ken-value"
    backend = PlaywrightBackend(
        tmp_path / "profile", executable_path=_says(fake_chromium, stderr, 1)
    )
    try:
        with pytest.raises(BrowserLaunchError) as info:
            await backend.launch()
    finally:
        await backend.aclose()
    assert "https://billing.example/callback" in str(info.value)
    assert "s3cr3t-t0ken-value" not in str(info.value)


@pytest.mark.chromium
async def test_a_headed_chromium_without_a_display_says_so_and_how_to_fix_it(
    tmp_path: Path, chromium_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real Chromium, headed, no display: the error carries its own "Missing X server"
    line and the fix (headless, the console, or xvfb-run), not only "died while starting"."""
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    backend = PlaywrightBackend(tmp_path / "profile", executable_path=chromium_path, headless=False)
    try:
        with pytest.raises(BrowserLaunchError) as info:
            await backend.launch()
    finally:
        await backend.aclose()
    said = str(info.value)
    assert "Missing X server or $DISPLAY" in said
    assert "xvfb-run" in said and "--console" in said and "headless" in said
