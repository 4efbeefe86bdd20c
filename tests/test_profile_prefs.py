"""The profile makes no speculative loads (the Guard cannot see them): the preference is set
before a launch, other preferences are kept, and a file we cannot read is left alone."""

from __future__ import annotations

import json
from pathlib import Path

from session_keeper._browser.playwright import no_speculative_loads


def test_a_fresh_profile_is_told_to_predict_nothing(tmp_path: Path) -> None:
    """No preferences yet: the file is written with network_prediction_options = 2."""
    no_speculative_loads(tmp_path)
    prefs = json.loads((tmp_path / "Default" / "Preferences").read_text())
    assert prefs == {"net": {"network_prediction_options": 2}}


def test_existing_preferences_are_kept_beside_it(tmp_path: Path) -> None:
    """A profile's own settings (third-party cookies, say) survive the change."""
    path = tmp_path / "Default" / "Preferences"
    path.parent.mkdir()
    path.write_text(json.dumps({"profile": {"block_third_party_cookies": False}, "net": {"x": 1}}))
    no_speculative_loads(tmp_path)
    assert json.loads(path.read_text()) == {
        "profile": {"block_third_party_cookies": False},
        "net": {"x": 1, "network_prediction_options": 2},
    }


def test_a_preferences_file_that_is_not_json_is_left_as_it_is(tmp_path: Path) -> None:
    """Chromium resets a broken file itself; we never write over what we cannot read."""
    path = tmp_path / "Default" / "Preferences"
    path.parent.mkdir()
    path.write_text("{not json")
    no_speculative_loads(tmp_path)
    assert path.read_text() == "{not json"
