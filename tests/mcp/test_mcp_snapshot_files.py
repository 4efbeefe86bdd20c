"""browser_snapshot's and browser_take_screenshot's options: target, depth, boxes, type,
and ``filename``, saved only inside the server's output directory."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest

from session_keeper.testing import LocalSites

from ..conftest import BackendFactory
from .conftest import call, structured, text
from .test_mcp_tools import _page, _ref
from .test_mcp_turns import served

pytestmark = [pytest.mark.chromium, pytest.mark.timeout(180)]

PNG = b"\x89PNG\r\n\x1a\n"


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
        for name in ("../outside.yml", "sub/page.yml", "link.yml", ""):
            refused = await call(client, "browser_snapshot", {"filename": name}, conversation="t")
            assert refused.is_error, name
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
    and a screenshot without one comes back as an image."""
    async with served(playwright_backend) as (_keeper, client):
        await _page(client)
        refused = await call(client, "browser_snapshot", {"filename": "page.yml"}, conversation="t")
        assert refused.is_error and "--output-dir" in text(refused)
        shot = await call(client, "browser_take_screenshot", {}, conversation="t")
        images = [c for c in shot.content if isinstance(c, types.ImageContent)]
        assert len(images) == 1 and images[0].mime_type == "image/png"
