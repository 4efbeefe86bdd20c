"""find_chromium: where it looks, in what order, and what it says when it finds nothing."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from session_keeper import find_chromium
from session_keeper._browser import chromium as _chromium
from session_keeper.errors import ChromiumNotFound


def fake_executable(path: Path) -> Path:
    """Create an executable stub at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """An environment where nothing is installed: empty PATH, no install locations, empty HOME."""
    monkeypatch.setattr(_chromium, "INSTALL_LOCATIONS", (str(tmp_path / "usr/bin/chromium"),))
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": "", "HOME": str(home)}


def test_env_override_wins(tmp_path: Path) -> None:
    """SESSION_KEEPER_CHROMIUM is used when it names an executable, before PATH."""
    chosen = fake_executable(tmp_path / "custom" / "my-chrome")
    on_path = fake_executable(tmp_path / "bin" / "chromium")
    env = {"SESSION_KEEPER_CHROMIUM": str(chosen), "PATH": str(on_path.parent)}
    assert find_chromium(env) == str(chosen)


@pytest.mark.parametrize("problem", ["missing", "not-executable"])
def test_bad_env_override_is_an_error_naming_it(tmp_path: Path, problem: str) -> None:
    """A wrong SESSION_KEEPER_CHROMIUM is reported, naming the variable, with no fallback."""
    target = tmp_path / "chrome"
    if problem == "not-executable":
        target.write_text("not a program")
    fallback = fake_executable(tmp_path / "bin" / "chromium")
    env = {"SESSION_KEEPER_CHROMIUM": str(target), "PATH": str(fallback.parent)}
    with pytest.raises(ChromiumNotFound, match="SESSION_KEEPER_CHROMIUM") as info:
        find_chromium(env)
    assert str(target) in str(info.value)


def test_path_lookup_in_name_order(tmp_path: Path, nowhere: dict[str, str]) -> None:
    """On PATH, ``chromium`` is preferred over ``google-chrome``; either is found."""
    first = tmp_path / "a"
    second = tmp_path / "b"
    chrome = fake_executable(first / "google-chrome")
    env = {**nowhere, "PATH": f"{first}:{second}"}
    assert find_chromium(env) == str(chrome)
    chromium = fake_executable(second / "chromium")
    assert find_chromium(env) == str(chromium)


def test_install_location_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nowhere: dict[str, str]
) -> None:
    """With nothing on PATH, a usual install location is found."""
    installed = fake_executable(tmp_path / "opt" / "google" / "chrome" / "chrome")
    monkeypatch.setattr(_chromium, "INSTALL_LOCATIONS", ("/nonexistent/chromium", str(installed)))
    assert find_chromium(nowhere) == str(installed)


def test_playwright_download_is_used(tmp_path: Path, nowhere: dict[str, str]) -> None:
    """Playwright's own download is found, newest revision first, via PLAYWRIGHT_BROWSERS_PATH."""
    root = tmp_path / "pw"
    fake_executable(root / "chromium-1100" / "chrome-linux" / "chrome")
    newest = fake_executable(root / "chromium-1255" / "chrome-linux64" / "chrome")
    env = {**nowhere, "PLAYWRIGHT_BROWSERS_PATH": str(root)}
    assert find_chromium(env) == str(newest)


def test_playwright_default_cache_under_home(nowhere: dict[str, str]) -> None:
    """Without PLAYWRIGHT_BROWSERS_PATH, ~/.cache/ms-playwright is searched."""
    home = Path(nowhere["HOME"])
    chrome = fake_executable(home / ".cache/ms-playwright/chromium-1/chrome-linux/chrome")
    assert find_chromium(nowhere) == str(chrome)


def test_not_found_lists_every_place_and_how_to_install(
    tmp_path: Path, nowhere: dict[str, str]
) -> None:
    """Finding nothing raises ChromiumNotFound listing each place looked and the remedies."""
    with pytest.raises(ChromiumNotFound) as info:
        find_chromium(nowhere)
    message = str(info.value)
    for place in (
        "SESSION_KEEPER_CHROMIUM",
        "chromium, chromium-browser, google-chrome, google-chrome-stable on PATH",
        str(tmp_path / "usr/bin/chromium"),
        str(Path(nowhere["HOME"]) / ".cache" / "ms-playwright"),
        "apt-get install chromium",
    ):
        assert place in message


def test_chromium_args_keep_the_browser_quiet() -> None:
    """Every launch disables background networking, updates, sync, first run and QUIC."""
    assert set(_chromium.CHROMIUM_ARGS) >= {
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
    }
