"""browser_snapshot's and browser_take_screenshot's options: target, depth, boxes, type,
and ``filename``, saved only inside the server's output directory; how an act's result
carries the page's snapshot (``action_snapshots``)."""

from __future__ import annotations

import re
from pathlib import Path

import mcp_types as types
import pytest

from session_keeper import Grant, Guard, SessionKeeper
from session_keeper._security.credentials import Secret
from session_keeper.errors import InvalidArgument
from session_keeper.mcp import KeeperMCP
from session_keeper.mcp._outputs import OutputDir
from session_keeper.testing import LocalSites

from ..conftest import BackendFactory, shared_driver_backend
from .conftest import call, structured, text
from .test_mcp_tools import _page, _ref
from .test_mcp_turns import served

# This file's backends share one Playwright driver (see tests/conftest.py).
playwright_backend = shared_driver_backend
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.timeout(180),
]

PNG = b"\x89PNG\r\n\x1a\n"
# Playwright MCP's name for a file nobody named: its ISO time in UTC, to the millisecond.
PLAYWRIGHT_NAME = re.compile(r"^page-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z(-\d+)?\.yml$")


async def test_snapshot_depth_boxes_and_target_shape_what_is_shown(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """depth cuts the tree, boxes adds each element's box, target shows one element."""
    async with served(playwright_backend) as (_keeper, client):
        full = await _page(client)
        shallow = structured(
            await call(client, "browser_snapshot", {"depth": 1}, conversation="t")
        )["snapshot"]
        assert len(shallow.splitlines()) < len(full.splitlines())
        boxed = structured(
            await call(client, "browser_snapshot", {"boxes": True}, conversation="t")
        )["snapshot"]
        assert "[box=" in boxed and "[box=" not in full
        one = structured(
            await call(
                client, "browser_snapshot", {"target": _ref(full, "Twice")}, conversation="t"
            )
        )["snapshot"]
        assert "Twice" in one and "Hover me" not in one
        bad = await call(client, "browser_snapshot", {"depth": -1}, conversation="t")
        assert bad.is_error and "depth" in text(bad)


async def test_a_filename_is_saved_in_the_output_directory_and_nowhere_else(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """With an output directory, a snapshot or screenshot filename is written there and
    linked (the screenshot is then not inlined); a name with a path, or a link planted in
    the directory, is refused and writes nothing anywhere."""
    out, outside = tmp_path / "out", tmp_path / "outside.yml"
    async with served(playwright_backend, output_dir=out) as (_keeper, client):
        await _page(client)
        snap = await call(client, "browser_snapshot", {"filename": "page.yml"}, conversation="t")
        assert not snap.is_error, text(snap)
        assert f"- [Snapshot]({out / 'page.yml'})" in text(snap)
        assert "Twice" in (out / "page.yml").read_text(encoding="utf-8")
        shot = await call(
            client, "browser_take_screenshot", {"filename": "shot.png"}, conversation="t"
        )
        assert not shot.is_error, text(shot)
        assert (out / "shot.png").read_bytes().startswith(PNG)
        assert not any(isinstance(c, types.ImageContent) for c in shot.content)
        jpeg = await call(
            client, "browser_take_screenshot", {"filename": "shot.jpg"}, conversation="t"
        )
        assert (out / "shot.jpg").read_bytes().startswith(b"\xff\xd8"), text(jpeg)
        (out / "link.yml").symlink_to(outside)
        for name in ("../outside.yml", "sub/page.yml", "link.yml"):
            refused = await call(client, "browser_snapshot", {"filename": name}, conversation="t")
            assert refused.is_error, name
        # As Playwright MCP: an empty filename is none (the snapshot comes back inline).
        unnamed = await call(client, "browser_snapshot", {"filename": ""}, conversation="t")
        assert not unnamed.is_error and "Twice" in structured(unnamed)["snapshot"]
        assert not outside.exists()
        assert sorted(p.name for p in out.iterdir()) == [
            "link.yml",
            "page.yml",
            "shot.jpg",
            "shot.png",
        ]


async def test_without_an_output_directory_a_filename_is_refused_and_results_stay_inline(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """No output directory (the default): a filename is refused saying how to allow it,
    and a screenshot without one (or with an empty one) comes back as an image."""
    async with served(playwright_backend) as (_keeper, client):
        await _page(client)
        refused = await call(client, "browser_snapshot", {"filename": "page.yml"}, conversation="t")
        assert refused.is_error and "--output-dir" in text(refused)
        for unnamed in ({}, {"filename": ""}):
            shot = await call(client, "browser_take_screenshot", unnamed, conversation="t")
            images = [c for c in shot.content if isinstance(c, types.ImageContent)]
            assert len(images) == 1 and images[0].mime_type == "image/png", text(shot)


async def test_file_action_snapshots_are_linked_files_and_browser_snapshot_stays_inline(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """With action_snapshots="file", an act's result links its snapshot, saved as
    page-*.yml in the output directory (as Playwright MCP does), instead of inlining it;
    an explicit browser_snapshot still answers inline."""
    out = tmp_path / "out"
    docs = sites.url("docs.example", "/")
    async with served(playwright_backend, output_dir=out, action_snapshots="file") as (
        _keeper,
        client,
    ):
        acted = await call(client, "browser_navigate", {"url": docs}, conversation="t")
        assert not acted.is_error, text(acted)
        saved = Path(structured(acted)["snapshot_file"])
        assert saved.parent == out and PLAYWRIGHT_NAME.match(saved.name), saved.name
        assert f"### Snapshot\n- [Snapshot]({saved})" in text(acted)
        assert "```yaml" not in text(acted) and "snapshot" not in structured(acted)
        shown = await call(client, "browser_snapshot", conversation="t")
        assert "```yaml" in text(shown)
        assert (out / saved.name).read_text(encoding="utf-8") == structured(shown)["snapshot"]
        # Besides the console log (the page logs its missing favicon).
        assert [p.name for p in out.iterdir() if not p.name.startswith("console-")] == [saved.name]


async def test_without_an_output_directory_file_action_snapshots_go_where_playwright_mcp_puts_them(
    playwright_backend: BackendFactory,
    sites: LocalSites,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """action_snapshots="file" with no output directory saves in ./.playwright-mcp and
    links it relative to the server's directory, as Playwright MCP's results do; a
    screenshot is saved there too, and still shown to the model."""
    monkeypatch.chdir(tmp_path)
    async with served(playwright_backend, action_snapshots="file") as (_keeper, client):
        acted = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")}, conversation="t"
        )
        assert not acted.is_error, text(acted)
        link = text(acted).split("- [Snapshot](", 1)[1].split(")", 1)[0]
        assert link.startswith(".playwright-mcp/page-")
        assert (tmp_path / link).read_text(encoding="utf-8").strip()
        shot = await call(client, "browser_take_screenshot", {}, conversation="t")
        assert (tmp_path / ".playwright-mcp" / Path(structured(shot)["file"]).name).exists()
        assert any(isinstance(c, types.ImageContent) for c in shot.content)


async def test_no_action_snapshots_answer_acts_with_the_page_and_no_snapshot(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """action_snapshots="none" (Playwright MCP's --snapshot-mode none): an act answers with
    the page's URL and title only; browser_snapshot still shows the page."""
    async with served(playwright_backend, action_snapshots="none") as (_keeper, client):
        acted = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")}, conversation="t"
        )
        assert not acted.is_error, text(acted)
        assert "### Page\n- Page URL: " in text(acted) and "### Snapshot" not in text(acted)
        assert not {"snapshot", "snapshot_file"} & set(structured(acted))
        shown = await call(client, "browser_snapshot", conversation="t")
        assert "### Snapshot" in text(shown) and structured(shown)["snapshot"]


async def test_an_unknown_action_snapshots_mode_is_refused(
    playwright_backend: BackendFactory,
) -> None:
    """KeeperMCP(action_snapshots=) is "inline", "file" or "none"; anything else is a
    typed error naming the choices."""
    keeper = SessionKeeper(playwright_backend(), grants=[Grant("billing", "billing.example")])
    Guard(keeper)
    with pytest.raises(InvalidArgument, match="'inline', 'file' or 'none'"):
        KeeperMCP(keeper, action_snapshots="files")


def test_files_nobody_named_never_overwrite_each_other(tmp_path: Path) -> None:
    """Snapshots saved within one millisecond get distinct Playwright MCP names; none is
    written over another."""
    outputs = OutputDir(tmp_path)
    saved = [outputs.save(None, str(i).encode(), prefix="page", ext="yml") for i in range(20)]
    assert len({p.name for p in saved}) == 20
    assert all(PLAYWRIGHT_NAME.match(p.name) for p in saved)
    assert sorted(p.read_text() for p in saved) == sorted(str(i) for i in range(20))


async def test_snapshot_boxes_puts_each_elements_box_in_every_snapshot_unless_a_call_says(
    playwright_backend: BackendFactory, sites: LocalSites
) -> None:
    """snapshot_boxes (Playwright MCP's --snapshot-boxes): an act's snapshot and
    browser_snapshot carry [box=...]; a browser_snapshot with boxes false does not."""
    async with served(playwright_backend, snapshot_boxes=True) as (_keeper, client):
        acted = await call(
            client, "browser_navigate", {"url": sites.url("docs.example", "/")}, conversation="t"
        )
        assert "[box=" in structured(acted)["snapshot"], text(acted)
        shown = await call(client, "browser_snapshot", conversation="t")
        assert "[box=" in structured(shown)["snapshot"]
        plain = await call(client, "browser_snapshot", {"boxes": False}, conversation="t")
        assert "[box=" not in structured(plain)["snapshot"]


async def test_a_saved_snapshot_shows_a_typed_secret_by_its_name_never_its_value(
    playwright_backend: BackendFactory, sites: LocalSites, tmp_path: Path
) -> None:
    """A --secrets value the page shows is written to a snapshot file, an act's or a named
    one, as <secret>NAME</secret>, as results show it: never the value itself."""
    canary = "canary-secret-7f3a"
    out = tmp_path / "out"
    secrets = {"NOTE_SECRET": Secret(canary)}
    async with served(
        playwright_backend, output_dir=out, action_snapshots="file", secrets=secrets
    ) as (_keeper, client):
        snap = await _page(client)
        typed = await call(
            client, "browser_type", {"element": "Name", "target": _ref(snap, "Name"),
                                     "text": "NOTE_SECRET", "slowly": True},
            conversation="t",
        )  # fmt: skip
        assert not typed.is_error, text(typed)
        named = await call(client, "browser_snapshot", {"filename": "n.yml"}, conversation="t")
        assert not named.is_error, text(named)
    written = [p.read_text(encoding="utf-8") for p in sorted(out.iterdir())]
    assert written and all(canary not in w for w in written)
    assert sum("<secret>NOTE_SECRET</secret>" in w for w in written) >= 2
