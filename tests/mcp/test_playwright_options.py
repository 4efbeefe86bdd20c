"""Playwright MCP's start-up options and config file: used, accepted with a note, or refused."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from session_keeper.errors import InvalidArgument
from session_keeper.mcp._options import PLAYWRIGHT_OPTIONS, config_argv, read_secrets
from session_keeper.mcp._serve import build_parser, check_args, main
from session_keeper.testing import LocalSites

from .conftest import call, ref, stdio_client, structured, text

CANARY_PASSWORD = "correct horse"  # LocalSites' billing password: must never be shown


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default profile lives in the user's cache: keep it in the test's directory.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _checked(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    return args


@pytest.mark.chromium
@pytest.mark.timeout(120)
async def test_a_playwright_mcp_command_line_serves_and_secrets_are_typed_never_shown(
    tmp_path: Path, sites: LocalSites, chromium_path: str
) -> None:
    """The options a Playwright MCP client config passes start the server; --viewport-size
    sizes the tab; a --secrets name typed by the model signs in with the value, which no
    result ever shows (it reads <secret>NAME</secret>)."""
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"# billing\nBILLING_PASSWORD='{CANARY_PASSWORD}'\n", encoding="utf-8")
    args = [
        "--user-data-dir", str(tmp_path / "p"), "--executable-path", chromium_path,
        "--headless", "--browser=chrome", "--no-sandbox", "--timeout-action=10000",
        "--caps=vision", "--viewport-size=800x600", "--secrets", str(secrets),
        "--host-resolver-rules", sites.host_resolver_rules, "--grant", "billing.example",
    ]  # fmt: skip
    async with stdio_client(args) as client:
        page = await call(
            client, "browser_navigate", {"url": sites.url("billing.example", "/login")}
        )
        assert not page.is_error, text(page)
        snap = structured(page)["snapshot"]
        user, pw = ref(snap, "textbox", "Username"), ref(snap, "textbox", "Password")
        await call(client, "browser_type", {"element": "Username", "target": user, "text": "alice"})
        typed = await call(
            client, "browser_type",
            {"element": "Password", "target": pw, "text": "BILLING_PASSWORD"},
        )  # fmt: skip
        shown = await call(
            client, "browser_evaluate",
            {"function": "() => [document.querySelector('[name=password]').value, innerWidth]"},
        )  # fmt: skip
        sent = await call(client, "browser_press_key", {"key": "Enter"})
        waited = await call(client, "browser_wait_for", {"text": "Invoices"})
    assert not waited.is_error, text(waited)  # the site took the real password
    assert "<secret>BILLING_PASSWORD</secret>" in text(shown), text(shown)
    assert "800" in text(shown), text(shown)
    for result in (page, typed, shown, sent, waited):
        assert CANARY_PASSWORD not in text(result)
        assert CANARY_PASSWORD not in json.dumps(result.structured_content)


def test_a_playwright_mcp_config_file_stands_for_the_same_options(tmp_path: Path) -> None:
    """Playwright MCP's JSON config becomes the same options, and the command line wins."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "browser": {
                    "browserName": "chromium",
                    "userDataDir": str(tmp_path / "from-config"),
                    "launchOptions": {"headless": True, "executablePath": "/usr/bin/chromium"},
                    "contextOptions": {
                        "viewport": {"width": 1024, "height": 768},
                        "deviceScaleFactor": 2,
                    },
                },
                "capabilities": ["vision"],
                "timeouts": {"action": 2500},
                "imageResponses": "omit",
            }
        ),
        encoding="utf-8",
    )
    parser = build_parser()
    args = parser.parse_args([*config_argv(config), "--user-data-dir", str(tmp_path / "mine")])
    check_args(parser, args)
    assert args.profile == tmp_path / "mine"
    assert args.executable == "/usr/bin/chromium"
    assert args.viewport_size == (1024, 768)
    assert args.device_scale_factor == 2
    assert args.timeout_action == 2500
    assert args.image_responses == "omit"
    assert args.notes == [
        "--caps changes nothing here: every tool here is always listed; "
        "vision, pdf and devtools are not"
    ]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--init-script", "x.js"], "run code on every conversation's pages"),
        (["--allowed-origins", "https://a.example"], "is a --grant, enforced by the Guard"),
        (["--allow-unrestricted-file-access"], "file: URLs never load by navigation"),
        (["--storage-state", "s.json"], "outside the login ledger"),
        (["--browser", "firefox"], "drives Chromium only"),
        (["--isolated", "--profile", "p"], "drop --profile"),
        (["--host", "127.0.0.1"], "--host needs --port"),
        (["--cdp-endpoint", "ws://[::1:9222/secret-key"], "endpoint"),
        (["--viewport-size", "wide"], "WIDTHxHEIGHT"),
        (["--device-scale-factor", "0"], "above 0, at most 10"),
        (["--timeout-action", "-5"], "milliseconds"),
        (["--snapshot-mode", "partial"], "invalid choice: 'partial'"),
        (["--test-id-attribute", "data tid"], "an HTML attribute name"),
    ],
)
def test_a_playwright_option_that_cannot_be_honoured_stops_the_server_saying_why(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused options exit 2 before anything starts, with the reason (never silently
    dropped, never a secret from the argument quoted back)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert says in err
    assert "secret-key" not in err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON object"),
        ('{"browser": {"launchOptions": {"args": ["--x"]}}}', "'browser.launchOptions.args'"),
        ('{"secrets": {"A": "hunter2-canary"}}', "dotenv file for --secrets"),
        ('{"browser": {"isolated": "yes"}}', "true or false"),
    ],
)
def test_a_config_file_it_cannot_read_is_a_clear_error_that_starts_nothing(
    content: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed config, or one with a key nothing here means, exits 2 naming the key;
    a secret written in it is not quoted back."""
    config = tmp_path / "config.json"
    config.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["--config", str(config), "--profile", str(tmp_path / "never-made")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert says in err
    assert "hunter2-canary" not in err
    assert not (tmp_path / "never-made").exists()


def test_a_malformed_secrets_file_names_the_line_never_the_value(tmp_path: Path) -> None:
    """A line that is not NAME=value is named by number; no value is in the message."""
    path = tmp_path / "secrets.env"
    path.write_text("GOOD=hunter2-canary\nnot a line hunter3-canary\n", encoding="utf-8")
    with pytest.raises(InvalidArgument) as exc:
        read_secrets(path)
    assert "line 2" in str(exc.value)
    assert "canary" not in str(exc.value)


def test_no_profile_means_one_persistent_default_profile(tmp_path: Path) -> None:
    """Like Playwright MCP, no --profile / --user-data-dir serves a persistent profile in
    the user's cache (the same one every start)."""
    args = _checked([])
    assert args.profile == tmp_path / "cache" / "session-keeper" / "mcp-profile"
    assert args.profile.is_dir()
    assert _checked([]).profile == args.profile


def test_every_playwright_option_has_a_status_and_a_reason() -> None:
    """The table the docs show: each option used, accepted or refused, and why."""
    for option in PLAYWRIGHT_OPTIONS:
        assert option.status in ("used", "accepted", "refused"), option
        assert option.why, option
    parser = build_parser()
    values = {
        "--browser": "chromium",
        "--viewport-size": "800x600",
        "--snapshot-mode": "none",
        "--console-level": "error",
        "--image-responses": "omit",
    }
    for option in PLAYWRIGHT_OPTIONS:
        argv = (
            [option.flag] if not option.takes_value else [option.flag, values.get(option.flag, "1")]
        )
        parser.parse_args(argv)  # every one of them parses


def test_the_guide_shows_every_playwright_option_as_the_server_treats_it() -> None:
    """docs/guides/mcp-clients.md's table is the server's own table, row for row."""
    guide = (Path(__file__).resolve().parents[2] / "docs/guides/mcp-clients.md").read_text()
    for option in PLAYWRIGHT_OPTIONS:
        assert f"| `{option.flag}` | {option.status} | {option.why} |" in guide, option.flag


def test_attaching_to_a_browser_makes_the_launch_options_moot_not_fatal() -> None:
    """As Playwright MCP: --cdp-endpoint with --executable-path or --isolated starts, and
    the start-up line says those are not used."""
    args = _checked(["--cdp-endpoint", "http://127.0.0.1:9222", "--executable-path", "/x"])
    assert any("not used with --cdp-endpoint" in note for note in args.notes), args.notes


@pytest.mark.parametrize(
    ("argv", "mode"),
    [
        ([], "inline"),
        (["--snapshot-mode", "full"], "inline"),
        (["--snapshot-mode=none"], "none"),
        (["--action-snapshots", "file"], "file"),
        (["--action-snapshots", "none", "--snapshot-mode", "none"], "none"),
        (["--action-snapshots", "file", "--snapshot-mode", "none"], "none"),
    ],
)
def test_snapshot_mode_none_and_action_snapshots_decide_how_acts_show_the_page(
    argv: list[str], mode: str
) -> None:
    """Playwright MCP's --snapshot-mode none is --action-snapshots none (and wins, with a
    start-up note, as a config file may give it); full, or nothing, keeps the inline
    default; --action-snapshots file links files."""
    args = _checked(argv)
    assert args.action_snapshots == mode
    overruled = "file" in argv and mode == "none"
    assert any("--snapshot-mode none" in n for n in args.notes) is overruled
    assert _checked([*argv, "--snapshot-boxes"]).snapshot_boxes is True
    assert args.snapshot_boxes is False
    assert _checked([*argv, "--image-responses", "omit"]).image_responses == "omit"
    assert args.image_responses == "allow"
