"""The profile makes no speculative loads (the Guard cannot see them) and keeps no
passwords, addresses or cards: the preferences are set before a launch, other preferences
are kept, and a file we cannot read is left alone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from playwright.async_api import Page

from session_keeper import SessionKeeper
from session_keeper._browser.playwright import PRIVATE_PREFS, private_profile_prefs
from session_keeper.testing import CHROMIUM_TEST_ARGS, LocalSites

from .conftest import BackendFactory

CANARY = "canary-password-5d81"

PRIVATE = {
    "net": {"network_prediction_options": 2},
    "credentials_enable_service": False,
    "profile": {"password_manager_enabled": False, "password_manager_leak_detection": False},
    "autofill": {"profile_enabled": False, "credit_card_enabled": False},
}


def test_a_fresh_profile_predicts_nothing_and_keeps_no_passwords_or_cards(tmp_path: Path) -> None:
    """No preferences yet: the file is written with every private preference."""
    private_profile_prefs(tmp_path)
    prefs = json.loads((tmp_path / "Default" / "Preferences").read_text())
    assert prefs == PRIVATE
    assert len(PRIVATE_PREFS) == 6


def test_existing_preferences_are_kept_beside_them(tmp_path: Path) -> None:
    """A profile's own settings (third-party cookies, say) survive the change, and a
    password manager a person turned on is turned off."""
    path = tmp_path / "Default" / "Preferences"
    path.parent.mkdir()
    path.write_text(
        json.dumps(
            {
                "profile": {"block_third_party_cookies": False, "password_manager_enabled": True},
                "net": {"x": 1},
            }
        )
    )
    private_profile_prefs(tmp_path)
    prefs = json.loads(path.read_text())
    assert prefs["profile"] == {
        "block_third_party_cookies": False,
        "password_manager_enabled": False,
        "password_manager_leak_detection": False,
    }
    assert prefs["net"] == {"x": 1, "network_prediction_options": 2}


def test_a_profile_already_private_is_not_rewritten(tmp_path: Path) -> None:
    """Nothing to change: the file is left untouched (same bytes)."""
    path = tmp_path / "Default" / "Preferences"
    path.parent.mkdir()
    path.write_text(json.dumps(PRIVATE, indent=1))
    before = path.read_bytes()
    private_profile_prefs(tmp_path)
    assert path.read_bytes() == before


def test_a_preferences_file_that_is_not_json_is_left_as_it_is(tmp_path: Path) -> None:
    """Chromium resets a broken file itself; we never write over what we cannot read."""
    path = tmp_path / "Default" / "Preferences"
    path.parent.mkdir()
    path.write_text("{not json")
    private_profile_prefs(tmp_path)
    assert path.read_text() == "{not json"


@pytest.mark.chromium
@pytest.mark.timeout(120)
async def test_a_sign_in_tells_the_autofill_service_nothing_about_the_site(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """Signing in on a real page, Chromium never looks up Google's autofill service (it
    did, with the site's form structure, before the preferences were set)."""
    netlog = tmp_path / "net.json"
    keeper: SessionKeeper[Page] = SessionKeeper(
        playwright_backend(args=[*CHROMIUM_TEST_ARGS, f"--log-net-log={netlog}"])
    )
    async with keeper:
        await keeper.ensure("c")
        page = await keeper.unguarded_page("c", sites.url("billing.example", "/login"))
        await page.fill("input[name=username]", "alice")
        await page.fill("input[type=password]", CANARY)
        await page.click("button")
        await page.wait_for_load_state("load")
        await asyncio.sleep(2)  # what Chromium sends after a submit, it sends by then
    log = netlog.read_text(encoding="utf-8", errors="replace")
    assert "billing.example" in log  # the log saw the sign-in itself
    assert "content-autofill.googleapis.com" not in log
    assert CANARY not in log
