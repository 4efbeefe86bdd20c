"""Which local files a page may be given: the server's upload directories, and no others.

A page never loads ``file:`` by navigation; a file reaches it only when a tool uploads
(``browser_file_upload``) or drops (``browser_drop``) it, and only from a directory the
person running the server named (``session-keeper mcp --upload-dir DIR``, or
``KeeperMCP(upload_dirs=...)``). With none, uploads are off.

A path is resolved (symlinks, ``..``) before it is checked, and the file is read
through the descriptor that was checked, so a link swapped in afterwards reads nothing
else. The page gets the bytes, never the path.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from session_keeper.errors import InvalidArgument, InvalidArgumentType, UploadRefused

#: The largest file one upload may send (bytes): it travels to the browser in memory.
UPLOAD_LIMIT_BYTES = 50 * 1024 * 1024


class UploadDirs:
    """The directories uploads may come from (resolved once, at start)."""

    def __init__(self, dirs: Sequence[str | os.PathLike[str]] = ()) -> None:
        resolved = []
        for d in dirs:
            if not isinstance(d, str | os.PathLike):
                raise InvalidArgumentType(f"an upload directory is a path, not {type(d).__name__}")
            path = Path(d).resolve()
            if not path.is_dir():
                raise InvalidArgument(f"upload directory {str(d)!r} is not a directory")
            resolved.append(path)
        self.dirs: tuple[Path, ...] = tuple(resolved)

    def _inside(self, path: Path) -> bool:
        return any(path == d or path.is_relative_to(d) for d in self.dirs)

    def _refuse(self, given: str, why: str) -> UploadRefused:
        if not self.dirs:
            return UploadRefused(
                "uploads are off: the server was started without --upload-dir, so no "
                "local file may be given to a page (whoever runs it can add "
                "--upload-dir DIR)"
            )
        allowed = ", ".join(str(d) for d in self.dirs)
        return UploadRefused(f"refused to upload {given!r}: {why} (uploads come from: {allowed})")

    def read(self, paths: Sequence[str]) -> list[dict[str, Any]]:
        """Each path's file as a payload (name, mimeType, buffer); raises
        :class:`~session_keeper.errors.UploadRefused` for any outside the directories,
        before any is read."""
        if not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
            raise InvalidArgumentType("paths must be a list of strings")
        if not self.dirs:
            raise self._refuse("", "")
        checked: list[tuple[str, Path]] = []
        for given in paths:
            if not given or not os.path.isabs(given):
                raise self._refuse(given, "not an absolute path")
            real = Path(os.path.realpath(given))
            if not self._inside(real):
                raise self._refuse(given, "it is outside the upload directories")
            checked.append((given, real))
        return [self._payload(given, real) for given, real in checked]

    def _payload(self, given: str, real: Path) -> dict[str, Any]:
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise self._refuse(given, f"it cannot be opened ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise self._refuse(given, "it is not a regular file")
            # What was opened, wherever its name points now (Linux names the descriptor).
            opened = f"/proc/self/fd/{f.fileno()}"
            if os.path.exists(opened) and not self._inside(Path(os.path.realpath(opened))):
                raise self._refuse(given, "it was moved outside the upload directories")
            if info.st_size > UPLOAD_LIMIT_BYTES:
                raise self._refuse(given, f"it is larger than {UPLOAD_LIMIT_BYTES} bytes")
            data = f.read(UPLOAD_LIMIT_BYTES + 1)
        kind = mimetypes.guess_type(real.name)[0] or "application/octet-stream"
        return {"name": real.name, "mimeType": kind, "buffer": data}
