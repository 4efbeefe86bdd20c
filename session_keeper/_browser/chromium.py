"""Finding a Chromium to drive, and the flags every launch needs.

Playwright normally downloads its own browser; session_keeper also runs where it
cannot (closed networks, distro packages only), so it looks for a Chromium the
machine already has. :func:`find_chromium` is the one place that knows where to
look, and its error lists every place it looked.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from session_keeper.errors import ChromiumNotFound

__all__ = ["CHROMIUM_ARGS", "ENV_VAR", "find_chromium"]

#: The environment variable that names the Chromium executable to use.
ENV_VAR = "SESSION_KEEPER_CHROMIUM"

#: Flags added to every Chromium launch. Without them Chromium phones home
#: (component updates, sync, field trials over QUIC) and, on a closed network,
#: floods it with retries; ``--no-first-run`` skips the first-run dialogs.
CHROMIUM_ARGS: tuple[str, ...] = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)

#: Executable names looked up on ``PATH``, in order.
PATH_NAMES: tuple[str, ...] = (
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
)

#: Usual install locations, in order (distro packages, snap, Google's packages, macOS).
INSTALL_LOCATIONS: tuple[str, ...] = (
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
    "/usr/lib64/chromium-browser/chromium-browser",
    "/snap/bin/chromium",
    "/usr/bin/google-chrome",
    "/usr/bin/google-chrome-stable",
    "/opt/google/chrome/chrome",
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
)

# Inside one Playwright browser directory (chromium-<revision>), per platform.
_PLAYWRIGHT_RELATIVE: tuple[str, ...] = (
    "chrome-linux64/chrome",
    "chrome-linux/chrome",
    "chrome-mac/Chromium.app/Contents/MacOS/Chromium",
    "chrome-mac-arm64/Chromium.app/Contents/MacOS/Chromium",
)

INSTALL_HINT = (
    "Install one (Debian/Ubuntu: `apt-get install chromium`; or "
    "`playwright install chromium` where downloads are allowed), "
    f"or set {ENV_VAR} to the path of a Chromium or Chrome executable."
)


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _playwright_candidates(env: Mapping[str, str]) -> Iterator[tuple[str, Path]]:
    """Playwright's downloaded Chromium builds, newest revision first."""
    root_text = env.get("PLAYWRIGHT_BROWSERS_PATH")
    # "0" means "next to the installed package", which we cannot locate cheaply; the
    # default cache is still worth a look then.
    if root_text and root_text != "0":
        root = Path(root_text).expanduser()
    else:
        home = env.get("HOME")
        root = (Path(home) if home else Path.home()) / ".cache" / "ms-playwright"
    pattern = f"{root}/chromium-*/{{{','.join(_PLAYWRIGHT_RELATIVE)}}}"
    found = False
    if root.is_dir():
        dirs = sorted(root.glob("chromium-*"), key=_revision, reverse=True)
        for d in dirs:
            for rel in _PLAYWRIGHT_RELATIVE:
                found = True
                yield (str(d / rel), d / rel)
    if not found:
        # Still report the place in the error message.
        yield (pattern, root / "chromium-*")


def _revision(path: Path) -> int:
    _, _, rev = path.name.partition("-")
    return int(rev) if rev.isdigit() else -1


def find_chromium(env: Mapping[str, str] | None = None) -> str:
    """Return the path of a Chromium (or Chrome) executable.

    Looks, in order, at:

    1. ``$SESSION_KEEPER_CHROMIUM`` — when set it must name an existing executable;
       otherwise :class:`ChromiumNotFound` names the variable and the value, without
       falling back (a wrong explicit setting is a mistake to report, not to hide);
    2. ``chromium``, ``chromium-browser``, ``google-chrome``, ``google-chrome-stable``
       on ``$PATH``;
    3. the usual install locations (:data:`INSTALL_LOCATIONS`);
    4. Playwright's downloaded browsers (``$PLAYWRIGHT_BROWSERS_PATH`` or
       ``~/.cache/ms-playwright/chromium-*/chrome-linux*/chrome``).

    ``env`` replaces ``os.environ`` (tests pass their own). Raises
    :class:`ChromiumNotFound` listing every place it looked and how to install one.
    """
    env = os.environ if env is None else env

    override = env.get(ENV_VAR)
    if override:
        path = Path(override).expanduser()
        if _is_executable(path):
            return str(path)
        problem = "does not exist" if not path.exists() else "is not an executable file"
        raise ChromiumNotFound(f"{ENV_VAR}={override!r} {problem}. {INSTALL_HINT}")

    looked: list[str] = [f"${ENV_VAR} (not set)"]

    search_path = env.get("PATH", "")
    for name in PATH_NAMES:
        hit = shutil.which(name, path=search_path)
        if hit:
            return hit
    looked.append(f"{', '.join(PATH_NAMES)} on PATH={search_path!r}")

    for location in INSTALL_LOCATIONS:
        if _is_executable(Path(location)):
            return location
        looked.append(location)

    for shown, candidate in _playwright_candidates(env):
        if _is_executable(candidate):
            return str(candidate)
        looked.append(shown)

    places = "\n  - ".join(looked)
    raise ChromiumNotFound(
        f"no Chromium executable found. Looked at:\n  - {places}\n{INSTALL_HINT}"
    )
