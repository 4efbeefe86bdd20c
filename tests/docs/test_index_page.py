"""The README and the package metadata read right on a package index page, where nothing
relative to the repository resolves and mermaid is not drawn."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from session_keeper.mcp import TOOL_NAMES

from ._guides import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
URLS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]

#: Where the project lives: every URL into the repository starts with it.
HOME = URLS["Source"]
_INTO_REPO = re.compile(
    re.escape(HOME) + r"/(?:blob|tree)/main/(?P<path>[^)\s#]+)"
    r"|https://raw\.githubusercontent\.com/"
    + re.escape(HOME.removeprefix("https://github.com/"))
    + r"/main/(?P<raw>[^)\s#]+)"
)
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _into_repo(url: str) -> Path | None:
    m = _INTO_REPO.fullmatch(url)
    return None if m is None else ROOT / (m.group("path") or m.group("raw"))


def test_every_readme_link_is_absolute_and_every_one_into_the_repo_resolves() -> None:
    """No relative link (it breaks on an index page); each link into the repository
    names a file or folder this checkout has."""
    targets = [m.group("target") for m in _LINK.finditer(README)]
    assert targets
    relative = [t for t in targets if not t.startswith(("https://", "http://", "#"))]
    assert relative == []
    for target in targets:
        path = _into_repo(target)
        if target.startswith(HOME + "/blob/") or "raw.githubusercontent.com" in target:
            assert path is not None and path.exists(), target


def test_the_metadata_names_docs_changelog_and_issues_in_the_repository() -> None:
    """Project-URLs: Documentation, Changelog and Issues, the first two on paths this
    checkout has."""
    assert {"Documentation", "Changelog", "Issues"} <= set(URLS)
    for key in ("Documentation", "Changelog"):
        path = _into_repo(URLS[key])
        assert path is not None and path.exists(), URLS[key]
    assert URLS["Issues"] == f"{HOME}/issues"


def test_the_diagram_is_an_image_with_its_mermaid_source_beside_it() -> None:
    """The README shows the diagram as a PNG (drawn everywhere) and links its source; no
    mermaid block is left to show as code."""
    assert "```mermaid" not in README
    images = [m.group(1) for m in re.finditer(r"!\[[^\]]*\]\(([^)]+)\)", README)]
    (image,) = [i for i in images if i.endswith(".png")]
    png = _into_repo(image)
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    source = png.with_suffix(".mmd")
    assert source.read_text().splitlines()[1] == "flowchart TD"
    assert f"{HOME}/blob/main/{source.relative_to(ROOT)}" in README


def test_every_guide_is_linked_from_the_readme() -> None:
    """A guide a reader of the README cannot reach might as well not exist."""
    for guide in sorted((ROOT / "docs" / "guides").glob("*.md")):
        assert f"{HOME}/blob/main/docs/guides/{guide.name}" in README, guide.name


def test_the_mcp_section_says_how_a_person_signs_in() -> None:
    """--console with the sign-in tool (its real name), or --headed."""
    section = README[README.index("### MCP server") :]
    section = section[: section.index("\n## ")]
    assert "--console" in section and "--headed" in section
    assert "`browser_request_sign_in`" in section
    assert "browser_request_sign_in" in TOOL_NAMES


def test_the_quick_start_says_what_stop_and_need_login_mean_where_it_prints_them() -> None:
    """Right after the output that shows both, one sentence tells them apart."""
    shown = README.index("decide: stop\n```")
    after = README[shown : README.index("\n## ", shown)]
    assert "`need_login`" in after and "`stop`" in after
