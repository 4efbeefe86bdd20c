"""``session-keeper mcp`` argument handling (no browser)."""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from session_keeper import Grant, SessionKeeper
from session_keeper.cli import main
from session_keeper.errors import InvalidArgument, TokenFileUnreadable
from session_keeper.mcp import KeeperMCP, TokenFile, door_policy
from session_keeper.mcp._serve import build_parser, check_args, describe_start
from session_keeper.testing import FakeBackend

from .conftest import ROOT


def _checked(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(["--profile", "p", *argv])
    check_args(parser, args)
    return args


def test_mcp_cli_reads_grants_http_address_and_conversation(tmp_path: Path) -> None:
    """Grants become Grant objects; --http is split into host and port."""
    tokens = tmp_path / "tokens.json"
    TokenFile(tokens).add(["billing"])
    args = _checked(
        "--grant", "billing:billing.example", "--grant", "research:billing.example:read",
        "--http", "127.0.0.1:8931", "--tokens", str(tokens),
    )  # fmt: skip
    assert args.grants == [
        Grant("billing", "billing.example", actions={"read", "write"}),
        Grant("research", "billing.example", actions={"read"}),
    ]
    assert args.http == ("127.0.0.1", 8931)


@pytest.mark.parametrize(
    ("argv", "grant"),
    [
        (["--grant", "billing.example"], Grant("mcp", "billing.example")),
        (["--grant", "billing.example:read"], Grant("mcp", "billing.example", actions={"read"})),
        (["--conversation", "desk", "--grant", "billing.example"],
         Grant("desk", "billing.example")),
        (["--conversation", "desk", "--conversation", "billing",
          "--grant", "billing:billing.example:read"],
         Grant("billing", "billing.example", actions={"read"})),
    ],
)  # fmt: skip
def test_a_stdio_grant_without_a_conversation_is_the_clients_own(
    argv: list[str], grant: Grant
) -> None:
    """On stdio, --grant SITE[:ACTIONS] is for the client's (first) conversation, so a login
    the client records there is usable by it."""
    args = _checked(*argv)
    assert args.grants == [grant]
    assert args.conversations[0] == (argv[1] if argv[0] == "--conversation" else "mcp")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--grant", "billing:billing.example"], "never is (it serves 'mcp')"),
        (["--conversation", "desk", "--grant", "billing:billing.example"],
         "--conversation billing"),
        (["--conversation", "bad\x00name"], "--conversation"),
    ],
)  # fmt: skip
def test_a_grant_the_stdio_client_could_never_use_is_refused_at_start(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stdio grant naming a conversation the client is not (the README's old config) exits 2
    with what to write instead; nothing starts."""
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--profile", "p", *argv])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_uploads_are_off_by_default_and_an_upload_dir_must_be_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --upload-dir means none (uploads refused); one that is not a directory stops
    the server before anything starts."""
    assert _checked().upload_dir == []
    assert _checked("--upload-dir", str(tmp_path)).upload_dir == [tmp_path]
    with pytest.raises(SystemExit) as exc:
        _checked("--upload-dir", str(tmp_path / "missing"))
    assert exc.value.code == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--grant", "billing.example"], "names no conversation"),
        (["--conversation", "desk"], "--conversation is for stdio"),
    ],
)
def test_http_grants_name_their_conversation(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over HTTP the tokens say who is who: a grant without a conversation, or a
    --conversation, is refused at start."""
    tokens = tmp_path / "tokens.json"
    TokenFile(tokens).add(["billing"])
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--profile", "p", "--http", "127.0.0.1:8931", "--tokens", str(tokens), *argv])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_the_start_up_line_names_the_conversation_and_its_grants() -> None:
    """At start the server says (on stderr) which conversation stdio serves and who may use
    what, so a wrong --grant is visible before the first refusal."""
    out = io.StringIO()
    describe_start(_checked("--grant", "billing.example:read"), out)
    assert out.getvalue() == (
        "session-keeper mcp: serving on stdio as conversation 'mcp' on profile p; "
        "grants: mcp may read billing.example\n"
    )


@pytest.mark.parametrize(
    "bad", [["--grant", "a:b:c:d"], ["--grant", "a::read"], ["--http", "8931"]]
)
def test_mcp_cli_refuses_bad_arguments_before_starting_anything(
    bad: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed grant or address exits 2 with one line naming the option and the
    fix; nothing starts."""
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--profile", "p", *bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"session-keeper mcp: error: argument {bad[0]}: ")
    assert err.count("\n") == 1 and "fix:" in err


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (["--http", "127.0.0.1:8931"], "--http needs --tokens FILE"),
        (["--http", "0.0.0.0:8931", "--tokens", "{tokens}"], "binds to loopback only"),
        (["--http", "192.168.1.5:8931", "--tokens", "{tokens}"], "--allow-remote"),
        (["--http", "0.0.0.0:8931", "--tokens", "{tokens}", "--allow-remote"], "--allowed-host"),
        (["--tokens", "{tokens}"], "need --http"),
        (["--http", "127.0.0.1:8931", "--tokens", "{tokens}", "--allowed-host", "a:b:c"], "NAME"),
    ],
)
def test_an_http_server_nobody_could_call_safely_is_refused_at_start(
    bad: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tokens, a non-loopback bind without --allow-remote, 0.0.0.0 with no host: exit 2."""
    tokens = tmp_path / "tokens.json"
    TokenFile(tokens).add(["docs"])
    argv = [a.replace("{tokens}", str(tokens)) for a in bad]
    with pytest.raises(SystemExit) as exc:
        main(["mcp", "--profile", str(tmp_path / "never-made"), *argv])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "never-made").exists()


def test_a_remote_bind_is_accepted_only_with_allow_remote_and_answers_only_its_hosts() -> None:
    """--allow-remote with --allowed-host: those hosts only; a LAN bind defaults to itself."""
    lan = door_policy("192.168.1.5", 8931, allow_remote=True)
    assert lan.allowed_hosts == {"192.168.1.5:8931"}
    named = door_policy("0.0.0.0", 8931, allow_remote=True, allowed_hosts=["Keeper.lan", "[::1]:9"])
    assert named.allowed_hosts == {"keeper.lan:8931", "[::1]:9"}
    assert named.allowed_origins == frozenset()
    loop = door_policy("127.0.0.1", 8931)
    assert loop.allowed_hosts == {"127.0.0.1:8931", "localhost:8931", "[::1]:8931"}


def test_token_add_prints_the_token_once_and_the_file_holds_only_its_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The canary token is printed by add only; the 0600 file, list and revoke never show it."""
    path = tmp_path / "tokens.json"
    base = ["mcp", "token"]
    assert main([*base, "add", "--tokens", str(path), "--conversation", "billing",
                 "--conversation", "docs", "--name", "alice"]) == 0  # fmt: skip
    token = capsys.readouterr().out.strip()
    assert token.startswith("skmcp_") and len(token) >= 6 + 43  # 256 random bits
    stored = path.read_text()
    assert token not in stored and token[6:20] not in stored
    assert hashlib.sha256(token.encode()).hexdigest() in stored
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (client,) = TokenFile(path).clients()
    assert client.conversations == ("billing", "docs") and client.name == "alice"
    assert TokenFile(path).verify(token) == client
    assert main([*base, "list", "--tokens", str(path), "--json"]) == 0
    listed = capsys.readouterr().out
    assert json.loads(listed)[0]["conversations"] == ["billing", "docs"]
    assert token not in listed and "sha256" not in listed
    before = path.read_bytes()
    assert main([*base, "add", "--tokens", str(path), "--conversation", "bad\x00name"]) == 2
    assert path.read_bytes() == before
    assert main([*base, "revoke", "--tokens", str(path), "alice"]) == 0
    assert TokenFile(path).verify(token) is None
    assert main([*base, "revoke", "--tokens", str(path), "alice"]) == 2
    assert token not in capsys.readouterr().err


def test_a_tokens_file_others_may_write_is_refused(tmp_path: Path) -> None:
    """A group- or world-writable tokens file could gain anyone's token: InvalidArgument."""
    path = tmp_path / "tokens.json"
    TokenFile(path).add(["docs"])
    path.chmod(0o666)
    with pytest.raises(InvalidArgument, match="writable by other users"):
        TokenFile(path).clients()


def test_the_readme_config_grants_the_clients_own_conversation() -> None:
    """The README's MCP config, as a user pastes it, grants the site to the very
    conversation the stdio client is, so the login it records is usable by it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### MCP server") :]
    block = section[section.index("```json") + len("```json") : section.index("```\n", 10)]
    config = json.loads(block)["mcpServers"]["browser"]
    assert config["command"] == "session-keeper" and config["args"][0] == "mcp"
    args = _checked(*config["args"][1:])
    assert [g.conversation for g in args.grants] == [args.conversations[0]]


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """``session-keeper --help`` leads with the MCP server and the console, then the
    store; ``session-keeper store --help`` names every store command, prune too."""
    with pytest.raises(SystemExit):
        main(["--help"])
    shown = capsys.readouterr().out
    listed = [shown.index(f"    {command}") for command in ("mcp", "console", "store")]
    assert listed == sorted(listed)
    assert shown.index("session-keeper mcp") < shown.index("session-keeper store")
    with pytest.raises(SystemExit):
        main(["store", "--help"])
    shown = capsys.readouterr().out
    for command in ("generations", "ledger", "grants", "jobs", "events", "metrics", "prune"):
        assert f"    {command}" in shown, command


@pytest.mark.parametrize("argv", [["--version"], ["mcp", "--version"]])
def test_version_is_the_installed_packages(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--version`` prints the installed distribution's version, for both commands."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    assert capsys.readouterr().out.split()[-1] == importlib.metadata.version("session-keeper")


@pytest.mark.parametrize(("command", "module"), [("mcp", "mcp"), ("console", "starlette")])
def test_a_missing_extra_names_the_pip_install(
    command: str, module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without its extra, a command exits 2 with the one line to run, not a traceback."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == module else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert main([command, "--profile", "p"]) == 2
    err = capsys.readouterr().err
    assert f"pip install 'session-keeper[{command}]'" in err
    assert err.count("\n") == 1


def test_the_server_reports_the_packages_version() -> None:
    """``serverInfo.version`` is the installed version, not empty."""
    keeper = SessionKeeper(FakeBackend())
    server = KeeperMCP(keeper).server  # type: ignore[arg-type]
    assert server.version == importlib.metadata.version("session-keeper")


def test_console_needs_the_command_that_may_build_one(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m session_keeper.mcp --console`` (no console factory) exits 2 saying to use
    the session-keeper command, before anything starts."""
    from session_keeper.mcp._serve import main as mcp_main

    with pytest.raises(SystemExit) as exc:
        mcp_main(["--profile", "p", "--console", "127.0.0.1:0"])
    assert exc.value.code == 2
    assert "--console needs the session-keeper command" in capsys.readouterr().err


#: Tokens files that are not one: bytes written, and what the one-line error says.
NOT_A_TOKENS_FILE = {
    "not-utf8": (b'\xff\xfe{"version": 1, "tokens": []}', "not UTF-8"),
    "nested-too-deep": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "not-json": (b'{"version": 1, "tokens": [', "not JSON"),
    "wrong-shape": (b'{"version": 1, "tokens": [["tok-1"]]}', "malformed tokens file entry"),
    "wrong-version": (b'{"version": 7, "tokens": []}', "not a version-1 tokens file"),
}


def _bad_tokens_file(tmp_path: Path, kind: str) -> tuple[Path, str]:
    data, says = NOT_A_TOKENS_FILE[kind]
    path = tmp_path / "tokens.json"
    path.write_bytes(data)
    path.chmod(0o600)
    return path, says


@pytest.mark.parametrize("kind", sorted(NOT_A_TOKENS_FILE))
def test_a_tokens_file_that_is_not_one_is_a_typed_error(tmp_path: Path, kind: str) -> None:
    """Not UTF-8, nested too deep, not JSON, a wrong shape or version: TokenFileUnreadable,
    and verify() admits nobody rather than raising."""
    path, says = _bad_tokens_file(tmp_path, kind)
    with pytest.raises(TokenFileUnreadable, match=says):
        TokenFile(path).clients()
    assert TokenFile(path).verify("skmcp_" + "A" * 43) is None


@pytest.mark.parametrize("kind", ["not-utf8", "nested-too-deep"])
@pytest.mark.parametrize("command", ["token-list", "token-add", "serve"])
def test_the_cli_says_in_one_line_that_a_tokens_file_is_not_one_and_exits_2(
    tmp_path: Path, kind: str, command: str
) -> None:
    """``mcp token list|add`` and ``mcp --http --tokens``: exit 2, one line on stderr naming
    the problem, no traceback, the file unchanged, no server started."""
    path, says = _bad_tokens_file(tmp_path, kind)
    before = path.read_bytes()
    argv = {
        "token-list": ["token", "list", "--tokens", str(path)],
        "token-add": ["token", "add", "--tokens", str(path), "--conversation", "docs"],
        "serve": ["--profile", str(tmp_path / "never-made"), "--http", "127.0.0.1:9",
                  "--tokens", str(path)],
    }[command]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "session_keeper.mcp", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in done.stderr, lines
    assert done.stdout == ""
    assert path.read_bytes() == before
    assert not (tmp_path / "never-made").exists()
