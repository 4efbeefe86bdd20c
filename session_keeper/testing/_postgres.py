"""TemporaryPostgres: a throwaway PostgreSQL server for tests, benchmarks and demos.

It runs the machine's own PostgreSQL binaries (``initdb``, ``pg_ctl``), listens on
127.0.0.1 only, on a free port, with its unix socket inside its own temporary
directory, and deletes everything on exit. PostgreSQL refuses to run as root, so
when we are root the cluster runs as an unprivileged user (``postgres`` if it
exists, else ``nobody``) that owns the temporary directory.

Durability settings are the server defaults (``fsync=on``,
``synchronous_commit=on``), so benchmarks against it measure real commits.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from session_keeper.errors import SessionKeeperError

#: Where to look for PostgreSQL binaries, besides $SESSION_KEEPER_PG_BIN and $PATH.
_PG_BIN_GLOBS: Final = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin")
_RUN_AS_CANDIDATES: Final = ("postgres", "nobody")


class TemporaryPostgresError(SessionKeeperError, RuntimeError):
    """The temporary PostgreSQL server could not be started."""


def find_pg_bin() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl`` (newest installed version first)."""
    override = os.environ.get("SESSION_KEEPER_PG_BIN")
    if override:
        candidate = Path(override)
        if (candidate / "initdb").exists():
            return candidate
        raise TemporaryPostgresError(f"SESSION_KEEPER_PG_BIN={override} has no initdb")
    found: list[Path] = []
    for pattern in _PG_BIN_GLOBS:
        found.extend(Path(p) for p in glob.glob(pattern) if (Path(p) / "initdb").exists())

    def version(p: Path) -> tuple[int, ...]:
        digits = [part for part in p.parts if part.replace(".", "").isdigit()]
        return tuple(int(x) for x in digits[-1].split(".")) if digits else (0,)

    if found:
        return max(found, key=version)
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise TemporaryPostgresError("no PostgreSQL installation found (initdb not on any known path)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    """A PostgreSQL cluster in a temporary directory, alive inside ``with``.

    ::

        with TemporaryPostgres() as pg:
            async with PostgresStore(pg.dsn) as store: ...

    :meth:`create_database` gives each test its own empty database cheaply.
    """

    def __init__(self, *, run_as: str | None = None, start_timeout: float = 60.0) -> None:
        self._run_as = run_as
        self._start_timeout = start_timeout
        self._tmp: Path | None = None
        self._port: int | None = None
        self._uid: int | None = None
        self._gid: int | None = None
        self._bin: Path | None = None
        self._databases = 0

    # -- public

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1."""
        if self._port is None:
            raise TemporaryPostgresError("the server is not running")
        return self._port

    @property
    def directory(self) -> Path:
        """The temporary directory holding the cluster and its socket; removed by :meth:`stop`."""
        if self._tmp is None:
            raise TemporaryPostgresError("the server is not running")
        return self._tmp

    @property
    def dsn(self) -> str:
        """A libpq connection string for the ``postgres`` database as superuser."""
        return self.dsn_for("postgres")

    def dsn_for(self, database: str) -> str:
        """A connection string for ``database`` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """initdb, then start the server and wait until it accepts connections."""
        if self._tmp is not None:
            return
        self._bin = find_pg_bin()
        self._tmp = Path(tempfile.mkdtemp(prefix="session-keeper-pg-"))
        try:
            self._pick_user()
            if self._uid is not None and self._gid is not None:
                os.chown(self._tmp, self._uid, self._gid)
            os.chmod(self._tmp, 0o700)
            data = self._tmp / "data"
            self._run(
                [
                    str(self._bin / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-sync",  # the throwaway cluster's initdb need not survive power loss
                ],
                "initdb",
            )
            self._start_server(data)
        except BaseException:
            self._cleanup()
            raise

    def stop(self) -> None:
        """Stop the server and delete its directory. Idempotent.

        Immediate shutdown: the data is about to be deleted, so the shutdown
        checkpoint (which flushes every dirty page) would be wasted time.
        """
        if self._tmp is None:
            return
        data = self._tmp / "data"
        if self._bin is not None and (data / "postmaster.pid").exists():
            with contextlib.suppress(TemporaryPostgresError):
                self._run(
                    [str(self._bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                    "pg_ctl stop",
                )
        self._cleanup()

    def restart(self, mode: str = "immediate") -> None:
        """Stop the server with ``pg_ctl stop -m <mode>`` and start it again on the same
        port and data directory (a crash and recovery when ``mode`` is ``"immediate"``).

        Raises :class:`TemporaryPostgresError` when it is not running or does not come back.
        """
        if self._tmp is None or self._bin is None or self._port is None:
            raise TemporaryPostgresError("the server is not running")
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError("mode is 'smart', 'fast' or 'immediate'")
        data = self._tmp / "data"
        self._run(
            [str(self._bin / "pg_ctl"), "-D", str(data), "-m", mode, "-w", "stop"],
            "pg_ctl stop",
        )
        self._start_server(data, port=self._port)

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database and return its DSN."""
        self._databases += 1
        db = name or f"sk_test_{os.getpid()}_{self._databases}"
        if not db.replace("_", "").isalnum():
            raise ValueError("database names are letters, digits and underscores")
        self.psql(f'CREATE DATABASE "{db}"')
        return self.dsn_for(db)

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL with ``psql`` as superuser; returns its unaligned output."""
        assert self._bin is not None
        out = self._run(
            [
                str(self._bin / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                sql,
            ],
            "psql",
        )
        return out.strip()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"TemporaryPostgres(port={self._port})"

    # -- internals

    def _pick_user(self) -> None:
        if os.geteuid() != 0:
            return  # already unprivileged: run as ourselves
        names = (self._run_as,) if self._run_as else _RUN_AS_CANDIDATES
        for name in names:
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            if entry.pw_uid != 0:
                self._uid, self._gid = entry.pw_uid, entry.pw_gid
                return
        raise TemporaryPostgresError(
            f"running as root and none of {list(names)} exists to run PostgreSQL as"
        )

    def _start_server(self, data: Path, port: int | None = None) -> None:
        assert self._bin is not None
        assert self._tmp is not None
        last_error = ""
        fixed = port
        for _ in range(5):  # the free port can be taken between probing and binding
            port = fixed if fixed is not None else _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {self._tmp} "
                "-c fsync=on -c synchronous_commit=on -c max_connections=100"
            )
            try:
                self._run(
                    [
                        str(self._bin / "pg_ctl"),
                        "-D",
                        str(data),
                        "-o",
                        options,
                        "-l",
                        str(self._tmp / "server.log"),
                        "-t",
                        str(int(self._start_timeout)),
                        "-w",
                        "start",
                    ],
                    "pg_ctl start",
                )
            except TemporaryPostgresError as exc:
                last_error = str(exc)
                continue
            self._port = port
            return
        raise TemporaryPostgresError(f"PostgreSQL did not start: {last_error}")

    def _run(self, argv: list[str], what: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                env=env,
                cwd=self._tmp,
                user=self._uid,
                group=self._gid,
                extra_groups=[] if self._uid is not None else None,
                timeout=self._start_timeout + 30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TemporaryPostgresError(f"{what} failed: {exc}") from None
        if proc.returncode != 0:
            log = ""
            if self._tmp is not None and (self._tmp / "server.log").exists():
                with contextlib.suppress(OSError):
                    log = (self._tmp / "server.log").read_text()[-2000:]
            raise TemporaryPostgresError(
                f"{what} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}\n{log}"
            )
        return proc.stdout

    def _cleanup(self) -> None:
        tmp, self._tmp = self._tmp, None
        self._port = None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
