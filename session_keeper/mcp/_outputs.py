"""Where the MCP tools may write files: the server's output directory, and nowhere else.

``browser_snapshot`` and ``browser_take_screenshot`` take Playwright MCP's ``filename``
and save there when the person running the server named a directory
(``session-keeper mcp --output-dir DIR``, ``KeeperMCP(output_dir=...)``); with none, a
``filename`` is refused and results stay inline. A file name is a plain name inside that
directory (no path, no ``..``); the file is created without following a link, so a link
planted in the directory is never written through.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.mcp._page import ToolFailure

#: The longest file name a tool may ask for (characters).
MAX_NAME_CHARS = 200


class OutputDir:
    """The one directory files are written to (``None``: files are off)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        if directory is None:
            self.path: Path | None = None
            return
        if not isinstance(directory, str | os.PathLike):
            raise InvalidArgumentType("the output directory is a path")
        path = Path(directory).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise InvalidArgument(f"output directory {str(directory)!r} is not a directory")
        self.path = path.resolve()

    def save(self, name: str | None, data: bytes, *, prefix: str, ext: str) -> Path:
        """Write ``data`` to ``name`` (``<prefix>-<time>.<ext>`` when ``None``) in the
        directory; return its path. Raises :class:`ToolFailure` when files are off or
        the name is not a plain file name."""
        if self.path is None:
            raise ToolFailure(
                "this server saves no files: leave out 'filename' (the result carries it "
                "inline), or start the server with --output-dir DIR"
            )
        if name is None:
            stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
            name = f"{prefix}-{stamp}-{time.monotonic_ns() % 1000:03d}.{ext}"
        if (
            not name
            or len(name) > MAX_NAME_CHARS
            or name in (".", "..")
            or any(c in name for c in "/\\\x00")
            or any(ord(c) < 0x20 for c in name)
        ):
            raise ToolFailure(
                "argument 'filename' must be a plain file name (no path), saved in the "
                "server's output directory"
            )
        target = self.path / name
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(target, flags, 0o644)
        except OSError as exc:
            raise ToolFailure(f"could not save {name!r}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return target
