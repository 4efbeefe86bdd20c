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
from datetime import UTC, datetime
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
            return self._save_new(data, prefix=prefix, ext=ext)
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
        return self._write(self.path / name, data, os.O_TRUNC)

    def new_file(self, *, prefix: str, ext: str, when: datetime | None = None) -> Path:
        """Create an empty file under the name :meth:`save` gives a file nobody named
        (``when``: the time in its name, default now) and return its path."""
        if self.path is None:
            raise ToolFailure("this server saves no files (start it with --output-dir DIR)")
        return self._save_new(b"", prefix=prefix, ext=ext, when=when)

    def append(self, target: Path, data: bytes) -> None:
        """Add ``data`` at the end of ``target``, a file :meth:`new_file` made (never
        through a link put in its place); raises :class:`OSError` when it cannot."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(target, flags)
        with os.fdopen(fd, "ab") as out:
            out.write(data)

    def _save_new(
        self, data: bytes, *, prefix: str, ext: str, when: datetime | None = None
    ) -> Path:
        """Save under Playwright MCP's name for a file nobody named,
        ``<prefix>-<UTC time to the millisecond>Z.<ext>`` (``-2``, ``-3``, ... when two
        come within one millisecond): never over an existing file."""
        assert self.path is not None
        now = when or datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H-%M-%S-") + f"{now.microsecond // 1000:03d}Z"
        for n in range(1, 100):
            name = f"{prefix}-{stamp}{'' if n == 1 else f'-{n}'}.{ext}"
            try:
                return self._write(self.path / name, data, os.O_EXCL)
            except FileExistsError:
                continue
        raise ToolFailure(f"could not save a new {prefix} file: too many in one millisecond")

    def _write(self, target: Path, data: bytes, mode: int) -> Path:
        flags = os.O_WRONLY | os.O_CREAT | mode | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(target, flags, 0o644)
        except FileExistsError:
            raise
        except OSError as exc:
            raise ToolFailure(f"could not save {target.name!r}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return target


def link(path: Path) -> str:
    """``path`` as a result names it: relative to the server's directory when inside it
    (Playwright MCP's links), absolute otherwise."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
