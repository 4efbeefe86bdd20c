"""Playwright MCP's start-up options and config file, understood by ``session-keeper mcp``.

A command line or ``--config`` file written for ``@playwright/mcp`` either works here
or stops the server with the reason: an option is *used* (it means here what it
means there), *accepted* (it has nothing to change here; the start-up line says so),
or *refused* (it would cross the boundary this server keeps, or is not offered).
:data:`PLAYWRIGHT_OPTIONS` is that table; ``docs/guides/mcp-clients.md`` shows it.

A ``--config`` file (Playwright MCP's JSON shape) becomes the same options, placed
before the command line's own, so the command line wins, as it does there.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from session_keeper._browser.selectors import check_test_id_attribute
from session_keeper._security.credentials import Secret
from session_keeper.errors import InvalidArgument, SessionKeeperError


@attrs.frozen(kw_only=True)
class PlaywrightOption:
    """One of Playwright MCP's start-up options, and what it does here."""

    flag: str
    #: ``"used"``, ``"accepted"`` or ``"refused"``.
    status: str
    #: What it does here (used), why it changes nothing (accepted) or why not (refused).
    why: str
    takes_value: bool = True


def _used(flag: str, why: str, *, value: bool = True) -> PlaywrightOption:
    return PlaywrightOption(flag=flag, status="used", why=why, takes_value=value)


def _accepted(flag: str, why: str, *, value: bool = True) -> PlaywrightOption:
    return PlaywrightOption(flag=flag, status="accepted", why=why, takes_value=value)


def _refused(flag: str, why: str, *, value: bool = True) -> PlaywrightOption:
    return PlaywrightOption(flag=flag, status="refused", why=why, takes_value=value)


_NOT_YET = "not offered yet: session_keeper launches every conversation in one shared context"

#: Playwright MCP's options (``@playwright/mcp --help``) and what each does here.
PLAYWRIGHT_OPTIONS: tuple[PlaywrightOption, ...] = (
    _used("--user-data-dir", "the Chromium profile (the same as --profile)"),
    _used("--executable-path", "the Chromium to run (the same as --executable)"),
    _used("--headless", "headless, the default here (--headed shows the window)", value=False),
    _used("--isolated", "a fresh profile in a temporary directory, removed at exit", value=False),
    _used("--browser", "chrome, chromium, chrome-for-testing or msedge: the Chromium found"),
    _used("--cdp-endpoint", "attach to that browser (CdpBackend) instead of launching one"),
    _used("--viewport-size", "every tab's viewport, WIDTHxHEIGHT"),
    _used("--timeout-action", "how long an element action waits, in milliseconds"),
    _used("--secrets", "a dotenv file: the model types a name, the page gets the value"),
    _used("--config", "a Playwright MCP JSON config file (these same options)"),
    _used("--port", "serve streamable HTTP on this port (the same as --http; needs --tokens)"),
    _used("--host", "the address for --port (default 127.0.0.1)"),
    _accepted("--no-sandbox", "Chromium runs without the sandbox only as root", value=False),
    _accepted("--sandbox", "Chromium runs without the sandbox only as root", value=False),
    _accepted("--caps", "every tool here is always listed; vision, pdf and devtools are not"),
    _used("--codegen", "typescript (the default), python or none; java and csharp: TypeScript"),
    _used("--console-level", "the least severe console message ### Events tells of"),
    _used("--image-responses", "omit: a screenshot is saved or described, never attached"),
    _used("--snapshot-mode", "none: acts answer without a snapshot; full: as --action-snapshots"),
    _used("--snapshot-boxes", "every snapshot carries each element's box", value=False),
    _used("--test-id-attribute", "the attribute test ids are read from, in the code too"),
    _accepted("--timeout-navigation", "the keeper's: 30 s to navigate, at most 5 s more for load"),
    _used("--timeout-settle", "how long an act's result waits for what it set off (500 ms)"),
    _used("--output-dir", "where snapshot and screenshot filenames are saved (else refused)"),
    _accepted("--output-max-size", "files in --output-dir are kept until you remove them"),
    _accepted("--save-session", "the keeper's store records the session", value=False),
    _accepted("--shared-browser-context", "all clients share one browser here anyway", value=False),
    _accepted("--block-service-workers", "service workers are always blocked", value=False),
    _accepted("--allowed-hosts", "use --allowed-host NAME[:PORT] (repeatable)"),
    _refused(
        "--allow-unrestricted-file-access",
        "file: URLs never load by navigation here; uploads come from --upload-dir",
        value=False,
    ),
    _refused(
        "--allowed-origins",
        "which sites a conversation may use is a --grant, enforced by the Guard",
    ),
    _refused(
        "--blocked-origins",
        "which sites a conversation may use is a --grant, enforced by the Guard",
    ),
    _refused("--extension", "attach to a browser with --cdp-endpoint", value=False),
    _refused("--endpoint", "attach to a browser with --cdp-endpoint"),
    _refused("--cdp-header", "--cdp-endpoint takes no headers here"),
    _refused("--cdp-timeout", "--cdp-endpoint takes no timeout here"),
    _refused("--init-page", "it would run code on every conversation's pages"),
    _refused("--init-script", "it would run code on every conversation's pages"),
    _refused(
        "--storage-state",
        "it would put cookies in the shared jar outside the login ledger; "
        "a person signs in (browser_request_sign_in)",
    ),
    _refused("--device", _NOT_YET),
    _refused("--mobile", _NOT_YET, value=False),
    _refused("--user-agent", _NOT_YET),
    _refused("--grant-permissions", _NOT_YET),
    _refused("--ignore-https-errors", _NOT_YET, value=False),
    _refused("--proxy-server", _NOT_YET),
    _refused("--proxy-bypass", _NOT_YET),
)

_BY_FLAG = {o.flag: o for o in PLAYWRIGHT_OPTIONS}
_CHROMIUM_NAMES = (
    "chrome",
    "chromium",
    "chrome-for-testing",
    "msedge",
    "chrome-beta",
    "msedge-beta",
)


def add_playwright_options(parser: argparse.ArgumentParser) -> None:
    """Add Playwright MCP's options (see :data:`PLAYWRIGHT_OPTIONS`) to ``parser``."""
    group = parser.add_argument_group(
        "Playwright MCP's options (a config for @playwright/mcp works here or says why not)"
    )
    group.add_argument("--user-data-dir", dest="profile", type=Path, help=argparse.SUPPRESS)
    group.add_argument("--executable-path", dest="executable", help=argparse.SUPPRESS)
    group.add_argument("--headless", action="store_true", help="headless (the default)")
    group.add_argument(
        "--isolated", action="store_true", help="a fresh temporary profile, removed at exit"
    )
    group.add_argument("--browser", metavar="NAME", help="chrome/chromium/msedge: the Chromium")
    group.add_argument(
        "--cdp-endpoint", metavar="URL", help="attach to a running browser's CDP endpoint"
    )
    group.add_argument(
        "--viewport-size", type=_viewport, metavar="WxH", help="the tabs' viewport, e.g. 1280x720"
    )
    group.add_argument(
        "--device-scale-factor",
        type=_scale_factor,
        metavar="N",
        help="device pixels per CSS pixel (default 1; a config's "
        "browser.contextOptions.deviceScaleFactor)",
    )
    group.add_argument(
        "--timeout-action",
        type=_milliseconds,
        default=None,
        metavar="MS",
        help="how long an element action waits (default 10000)",
    )
    group.add_argument(
        "--timeout-settle",
        type=_settle_ms,
        default=None,
        metavar="MS",
        help="how long an act's result waits for what the act set off (default 500)",
    )
    group.add_argument(
        "--secrets",
        type=Path,
        metavar="FILE",
        help="a dotenv file of NAME=value: the model types NAME, the page gets the value, "
        "and results show <secret>NAME</secret> wherever the value would appear",
    )
    group.add_argument(
        "--codegen",
        default="typescript",
        metavar="LANG",
        help="typescript (default), python or none: the code each page tool ran, in its result",
    )
    group.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="where browser_snapshot / browser_take_screenshot save a 'filename' "
        "(default none: results stay inline)",
    )
    group.add_argument(
        "--action-snapshots",
        choices=("inline", "file", "none"),
        default=None,
        help="how an act's result carries the page snapshot: inline (default), file "
        "(page-*.yml in --output-dir, else ./.playwright-mcp, linked as Playwright MCP "
        "does) or none",
    )
    group.add_argument(
        "--snapshot-mode",
        choices=("full", "none"),
        default=None,
        help="Playwright MCP's: none is --action-snapshots none",
    )
    group.add_argument(
        "--test-id-attribute",
        metavar="NAME",
        help="the attribute generated code reads test ids from (default data-testid)",
    )
    group.add_argument(
        "--snapshot-boxes",
        action="store_true",
        help="every snapshot carries each element's [box=x,y,w,h]",
    )
    group.add_argument(
        "--image-responses",
        choices=("allow", "omit"),
        default="allow",
        help="omit: screenshots are not attached to results (default allow)",
    )
    group.add_argument(
        "--console-level",
        choices=("error", "warning", "info", "debug"),
        default="info",
        help="the least severe console message a result's Events tell of (default info); "
        "with --output-dir they are logged to console-*.log there",
    )
    group.add_argument("--config", type=Path, metavar="FILE", help="a Playwright MCP config file")
    group.add_argument(
        "--port", type=int, help="serve HTTP on this port (as --http; needs --tokens)"
    )
    group.add_argument("--host", help="the address for --port (default 127.0.0.1)")
    for option in PLAYWRIGHT_OPTIONS:
        if option.flag in _HANDLED:
            continue
        # Accepted and refused options are parsed so the reason can be given.
        kind: dict[str, Any] = (
            {"nargs": "?", "const": ""}
            if option.takes_value
            else {"action": "store_const", "const": ""}
        )
        group.add_argument(
            option.flag,
            dest=f"pw_{option.flag[2:].replace('-', '_')}",
            help=argparse.SUPPRESS,
            **kind,
        )


_HANDLED = frozenset(
    {
        "--user-data-dir",
        "--executable-path",
        "--headless",
        "--isolated",
        "--browser",
        "--cdp-endpoint",
        "--viewport-size",
        "--timeout-action",
        "--secrets",
        "--config",
        "--port",
        "--host",
        "--codegen",
        "--output-dir",
        "--snapshot-mode",
        "--snapshot-boxes",
        "--test-id-attribute",
        "--console-level",
        "--image-responses",
        "--timeout-settle",
    }
)


def given_options(args: argparse.Namespace) -> list[PlaywrightOption]:
    """The accepted and refused Playwright MCP options ``args`` carries."""
    given = []
    for option in PLAYWRIGHT_OPTIONS:
        dest = f"pw_{option.flag[2:].replace('-', '_')}"
        if getattr(args, dest, None) is not None:
            given.append(option)
    return given


def check_playwright_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> list[str]:
    """Refuse what cannot be honoured; return the start-up notes for accepted options.

    Also sets ``args.http`` from ``--port``/``--host``.
    """
    for option in given_options(args):
        if option.status == "refused":
            parser.error(f"{option.flag} is not supported by session-keeper mcp: {option.why}")
    if args.browser is not None and args.browser not in _CHROMIUM_NAMES:
        parser.error(
            f"--browser {args.browser}: session-keeper mcp drives Chromium only "
            f"(one of {', '.join(_CHROMIUM_NAMES)})"
        )
    notes: list[str] = []
    if args.codegen in ("java", "csharp"):
        notes.append(f"--codegen {args.codegen}: results show the code in TypeScript here")
        args.codegen = "typescript"
    elif args.codegen not in ("typescript", "python", "none"):
        parser.error("--codegen is typescript, python or none")
    try:
        check_test_id_attribute(args.test_id_attribute)
    except SessionKeeperError as exc:
        parser.error(f"--test-id-attribute: {exc}")
    if args.snapshot_mode == "none":
        if args.action_snapshots not in (None, "none"):
            # Playwright MCP's own option, as a config file may give it: it wins.
            notes.append(
                f"--snapshot-mode none: acts answer without a snapshot "
                f"(not --action-snapshots {args.action_snapshots})"
            )
        args.action_snapshots = "none"
    elif args.action_snapshots is None:
        args.action_snapshots = "inline"
    if args.isolated and args.profile is not None:
        parser.error("--isolated takes a fresh temporary profile: drop --profile/--user-data-dir")
    if args.cdp_endpoint is not None:
        # As Playwright MCP: attaching to a browser makes the launch options moot.
        moot = [
            flag
            for flag, given in (
                ("--executable-path", args.executable),
                ("--isolated", args.isolated),
                ("--headed", args.headed),
                ("--user-data-dir", args.profile),
                ("--viewport-size", args.viewport_size),
                ("--device-scale-factor", args.device_scale_factor),
            )
            if given
        ]
        if moot:
            notes.append(
                f"{', '.join(moot)}: not used with --cdp-endpoint (the browser is already running)"
            )
    if args.port is not None:
        if args.http is not None:
            parser.error("give either --http HOST:PORT or --port (with --host)")
        args.http = (args.host or "127.0.0.1", args.port)
    elif args.host is not None:
        parser.error("--host needs --port")
    return notes + [
        f"{o.flag} changes nothing here: {o.why}"
        for o in given_options(args)
        if o.status == "accepted"
    ]


def config_argv(path: Path) -> list[str]:
    """The options a Playwright MCP JSON config file at ``path`` stands for.

    Raises :class:`InvalidArgument` for a file that cannot be read, is not JSON, or
    names a key with no option (saying which).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArgument(f"--config {path}: cannot read it ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"--config {path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"--config {path}: the file must hold a JSON object")
    out: list[str] = []
    _Config(path, out).walk(data, "")
    return out


@attrs.define
class _Config:
    """Turns a config object into options, key by key."""

    path: Path
    out: list[str]

    def fail(self, key: str, why: str) -> InvalidArgument:
        return InvalidArgument(f"--config {self.path}: {key!r} {why}")

    def flag(self, flag: str, value: Any, key: str) -> None:
        option = _BY_FLAG.get(flag)
        if option is not None and not option.takes_value:
            if not isinstance(value, bool):
                raise self.fail(key, "must be true or false")
            if value:
                self.out.append(flag)
            return
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(key, "must be a string or a number")
        self.out.append(f"{flag}={value}")

    def walk(self, data: Mapping[str, Any], prefix: str) -> None:
        for name, value in data.items():
            key = f"{prefix}{name}"
            handler = _CONFIG_KEYS.get(key)
            if handler is None:
                if isinstance(value, dict) and key in _CONFIG_SECTIONS:
                    self.walk(value, f"{key}.")
                    continue
                raise self.fail(key, "is not a Playwright MCP setting session-keeper mcp knows")
            handler(self, value, key)


def _simple(flag: str) -> Any:
    return lambda cfg, value, key: cfg.flag(flag, value, key)


def _viewport_key(cfg: _Config, value: Any, key: str) -> None:
    if not isinstance(value, dict) or set(value) != {"width", "height"}:
        raise cfg.fail(key, 'must be {"width": W, "height": H}')
    cfg.out.append(f"--viewport-size={value['width']}x{value['height']}")


def _headless_key(cfg: _Config, value: Any, key: str) -> None:
    if not isinstance(value, bool):
        raise cfg.fail(key, "must be true or false")
    cfg.out.append("--headless" if value else "--headed")


def _list_key(flag: str) -> Any:
    def handle(cfg: _Config, value: Any, key: str) -> None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise cfg.fail(key, "must be a list of strings")
        cfg.out.append(f"{flag}={','.join(value)}")

    return handle


def _secrets_key(cfg: _Config, value: Any, key: str) -> None:
    # Secrets written into the config itself would need a file of their own here.
    raise cfg.fail(key, "is not read from the config: put them in a dotenv file for --secrets")


_CONFIG_SECTIONS = frozenset(
    {"browser", "browser.launchOptions", "browser.contextOptions", "server", "console",
     "network", "timeouts", "snapshot"}
)  # fmt: skip
_CONFIG_KEYS: dict[str, Any] = {
    "browser.browserName": _simple("--browser"),
    "browser.isolated": _simple("--isolated"),
    "browser.userDataDir": _simple("--user-data-dir"),
    "browser.launchOptions.headless": _headless_key,
    "browser.launchOptions.executablePath": _simple("--executable-path"),
    "browser.launchOptions.channel": _simple("--browser"),
    "browser.launchOptions.chromiumSandbox": lambda cfg, v, k: cfg.flag("--sandbox", v, k),
    "browser.contextOptions.viewport": _viewport_key,
    "browser.contextOptions.deviceScaleFactor": _simple("--device-scale-factor"),
    "browser.cdpEndpoint": _simple("--cdp-endpoint"),
    "browser.cdpHeaders": lambda cfg, v, k: cfg.flag("--cdp-header", str(v), k),
    "browser.cdpTimeout": _simple("--cdp-timeout"),
    "browser.remoteEndpoint": lambda cfg, v, k: cfg.flag("--endpoint", str(v), k),
    "browser.initPage": _list_key("--init-page"),
    "browser.initScript": _list_key("--init-script"),
    "extension": _simple("--extension"),
    "server.port": _simple("--port"),
    "server.host": _simple("--host"),
    "server.allowedHosts": _list_key("--allowed-hosts"),
    "capabilities": _list_key("--caps"),
    "saveSession": _simple("--save-session"),
    "sharedBrowserContext": _simple("--shared-browser-context"),
    "secrets": _secrets_key,
    "outputDir": _simple("--output-dir"),
    "outputMaxSize": _simple("--output-max-size"),
    "console.level": _simple("--console-level"),
    "network.allowedOrigins": _list_key("--allowed-origins"),
    "network.blockedOrigins": _list_key("--blocked-origins"),
    "testIdAttribute": _simple("--test-id-attribute"),
    "timeouts.action": _simple("--timeout-action"),
    "timeouts.navigation": _simple("--timeout-navigation"),
    "timeouts.settle": _simple("--timeout-settle"),
    "imageResponses": _simple("--image-responses"),
    "snapshot.mode": _simple("--snapshot-mode"),
    "snapshot.boxes": _simple("--snapshot-boxes"),
    "allowUnrestrictedFileAccess": _simple("--allow-unrestricted-file-access"),
    "codegen": _simple("--codegen"),
}


def expand_config(argv: Sequence[str]) -> list[str]:
    """``argv`` with a ``--config FILE`` replaced by the options the file stands for,
    placed first (so the command line's own options win). Raises :class:`InvalidArgument`."""
    out: list[str] = []
    config: list[str] = []
    items = list(argv)
    i = 0
    while i < len(items):
        item = items[i]
        if item == "--config" and i + 1 < len(items):
            config = config_argv(Path(items[i + 1]))
            i += 2
            continue
        if item.startswith("--config="):
            config = config_argv(Path(item.split("=", 1)[1]))
            i += 1
            continue
        out.append(item)
        i += 1
    return [*config, *out]


def read_secrets(path: Path) -> dict[str, Secret]:
    """The ``NAME=value`` lines of a dotenv file (``#`` comments, optional quotes).

    Raises :class:`InvalidArgument` naming the line (never its value) when one is not
    ``NAME=value``.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"--secrets {path}: cannot read it ({type(exc).__name__})") from None
    secrets: dict[str, Secret] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name.replace("_", "").isalnum() or not name.isascii():
            raise InvalidArgument(f"--secrets {path}: line {number} is not NAME=value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if not value:
            raise InvalidArgument(f"--secrets {path}: {name} (line {number}) is empty")
        secrets[name] = Secret(value)
    return secrets


def _viewport(text: str) -> tuple[int, int]:
    width, sep, height = text.lower().replace(",", "x").partition("x")
    if not sep or not width.strip().isdigit() or not height.strip().isdigit():
        raise argparse.ArgumentTypeError("--viewport-size is WIDTHxHEIGHT, e.g. 1280x720")
    w, h = int(width), int(height)
    if not (1 <= w <= 10_000 and 1 <= h <= 10_000):
        raise argparse.ArgumentTypeError("--viewport-size: each side is 1 to 10000 pixels")
    return w, h


def _scale_factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("--device-scale-factor is a number, e.g. 2") from None
    if not 0 < value <= 10:
        raise argparse.ArgumentTypeError("--device-scale-factor is above 0, at most 10")
    return value


def _milliseconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("a timeout is a number of milliseconds") from None
    if not 0 < value <= 600_000:
        raise argparse.ArgumentTypeError("a timeout is 1 to 600000 milliseconds")
    return value


def _settle_ms(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("a settle time is a number of milliseconds") from None
    if not 0 <= value <= 60_000:
        raise argparse.ArgumentTypeError("a settle time is 0 to 60000 milliseconds")
    return value


def default_profile() -> Path:
    """Where the profile lives when no ``--profile`` is given (like Playwright MCP's)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "session-keeper" / "mcp-profile"
