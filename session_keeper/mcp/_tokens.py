"""Bearer tokens of the MCP server's HTTP clients, kept in a file as SHA-256 digests.

Each client gets its own token, naming the conversation(s) it may act as. The token is
printed once when it is issued; the file keeps only its SHA-256 digest (a token is 256
random bits, so a digest cannot be turned back into one), written atomically with
mode 0600. A running server re-reads the file when it changes, so ``token revoke``
takes effect on the next request.

Why a file and not the keeper's Store: the MCP server runs without a store, the file
is managed while the server runs (no second writer on the state document), and a
person can read who may do what without a database client.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from session_keeper._model.grants import check_name
from session_keeper._util.redact import scrubbing_logger
from session_keeper.errors import InvalidArgument, InvalidArgumentType, TokenFileUnreadable

log = scrubbing_logger("session_keeper.mcp")

#: Every token starts with this, so a leaked one is recognisable (and greppable).
TOKEN_PREFIX = "skmcp_"
#: A presented token longer than this is not one of ours: refused before hashing.
MAX_TOKEN_LENGTH = 128
#: Token characters (base64url after the prefix).
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_VERSION = 1


@attrs.frozen(kw_only=True)
class McpClient:
    """One HTTP client of the MCP server: what its token lets it act as."""

    #: ``tok-<hex>``: names the token in ``token list`` / ``token revoke`` (not a secret).
    id: str
    #: Who holds it, for people reading the list (optional; never an identity).
    name: str | None
    #: The conversations it may act as; the first is its default.
    conversations: tuple[str, ...]
    created_at: datetime
    #: SHA-256 of the token, hex.
    sha256: str = attrs.field(repr=False)

    def to_dict(self) -> dict[str, object]:
        """The file's form of this entry."""
        return {
            "id": self.id,
            "name": self.name,
            "conversations": list(self.conversations),
            "created_at": self.created_at.astimezone(UTC).isoformat(),
            "sha256": self.sha256,
        }

    @classmethod
    def from_dict(cls, d: Any) -> McpClient:
        """Read :meth:`to_dict`'s form; a malformed entry raises :class:`InvalidArgument`."""
        try:
            conversations = tuple(check_name(c, "conversation") for c in d["conversations"])
            digest = d["sha256"]
            if not conversations or not isinstance(digest, str) or len(digest) != 64:
                raise ValueError("an entry needs conversations and a sha256 digest")
            bytes.fromhex(digest)
            name = d.get("name")
            return cls(
                id=check_name(d["id"], "token id"),
                name=None if name is None else check_name(name, "name"),
                conversations=conversations,
                created_at=datetime.fromisoformat(d["created_at"]),
                sha256=digest,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"malformed tokens file entry: {exc}") from None


def _why(exc: OSError) -> str:
    """An OS error's reason without its repr (the path is said by the caller)."""
    return (exc.strerror or type(exc).__name__).lower()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("ascii")).digest()


def well_formed(token: str) -> bool:
    """Whether ``token`` has the shape of one we issue (checked before any hashing)."""
    return (
        len(token) <= MAX_TOKEN_LENGTH
        and token.startswith(TOKEN_PREFIX)
        and len(token) > len(TOKEN_PREFIX)
        and all(ch in _TOKEN_CHARS for ch in token[len(TOKEN_PREFIX) :])
    )


class TokenFile:
    """The tokens file at ``path``: issue, list, revoke and verify client tokens."""

    def __init__(self, path: Path | str) -> None:
        if not isinstance(path, str | Path):
            raise InvalidArgumentType("path must be a str or Path")
        self.path = Path(path)
        self._seen: tuple[int, int, int] | None = None
        self._clients: tuple[McpClient, ...] = ()

    # -- reading ---------------------------------------------------------------------
    def clients(self) -> tuple[McpClient, ...]:
        """The entries, re-read when the file changed; a missing file has none.

        Raises :class:`~session_keeper.errors.TokenFileUnreadable` when the file cannot
        be read as a tokens file (not UTF-8, not the expected JSON, unreadable) or is
        writable by anyone but its owner (another user could add a token for
        themselves). Nothing is kept from a file that failed: the next call reads again.
        """
        try:
            st = self.path.stat()
        except FileNotFoundError:
            self._seen, self._clients = None, ()
            return ()
        except OSError as exc:
            raise TokenFileUnreadable(f"tokens file {self.path}: {_why(exc)}") from None
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != self._seen:
            self._seen, self._clients = None, ()
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                raise TokenFileUnreadable(
                    f"tokens file {self.path} is writable by other users: chmod 600 it"
                )
            try:
                raw = self.path.read_bytes()
            except OSError as exc:
                raise TokenFileUnreadable(f"tokens file {self.path}: {_why(exc)}") from None
            self._clients = self._parse(raw)
            self._seen = key
        return self._clients

    def _parse(self, raw: bytes) -> tuple[McpClient, ...]:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TokenFileUnreadable(f"{self.path} is not a tokens file (not UTF-8)") from None
        try:
            doc = json.loads(text)
        except RecursionError:
            # json raises this, not a ValueError, for arrays or objects nested too deep.
            raise TokenFileUnreadable(
                f"{self.path} is not a tokens file (JSON nested too deeply)"
            ) from None
        except ValueError:
            raise TokenFileUnreadable(f"{self.path} is not a tokens file (not JSON)") from None
        if not isinstance(doc, dict) or doc.get("version") != _VERSION:
            raise TokenFileUnreadable(f"{self.path} is not a version-{_VERSION} tokens file")
        entries = doc.get("tokens")
        if not isinstance(entries, list):
            raise TokenFileUnreadable(f"{self.path} has no token list")
        try:
            return tuple(McpClient.from_dict(e) for e in entries)
        except InvalidArgument as exc:
            raise TokenFileUnreadable(f"{self.path}: {exc}") from None

    def verify(self, token: str) -> McpClient | None:
        """The client ``token`` belongs to, or ``None``.

        Fails closed: a file that cannot be read admits nobody (and is logged). Every
        entry is compared in constant time, so the answer's timing says nothing about
        which digest came close.
        """
        if not well_formed(token):
            return None
        try:
            clients = self.clients()
        except TokenFileUnreadable as exc:
            log.warning("MCP tokens file unusable, refusing every client: %s", exc)
            return None
        digest = _digest(token)
        found = None
        for client in clients:
            if hmac.compare_digest(digest, bytes.fromhex(client.sha256)):
                found = client
        return found

    # -- changing (the CLI) ------------------------------------------------------------
    def add(
        self, conversations: Sequence[str], *, name: str | None = None
    ) -> tuple[McpClient, str]:
        """Issue a token for ``conversations``; return its entry and the token itself.

        The token is returned once and never stored: keep it in the client's config.
        """
        if isinstance(conversations, str) or not conversations:
            raise InvalidArgument("a token needs at least one conversation")
        convs = tuple(dict.fromkeys(check_name(c, "conversation") for c in conversations))
        if name is not None:
            check_name(name, "name")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)  # 256 random bits
        client = McpClient(
            id=f"tok-{secrets.token_hex(4)}",
            name=name,
            conversations=convs,
            created_at=datetime.now(UTC),
            sha256=_digest(token).hex(),
        )
        with self._locked():
            self._write((*self.clients(), client))
        return client, token

    def revoke(self, which: str) -> McpClient:
        """Remove the token with id (or unique name) ``which``; return its entry."""
        check_name(which, "token")
        with self._locked():
            clients = self.clients()
            matches = [c for c in clients if c.id == which] or [
                c for c in clients if c.name == which
            ]
            if len(matches) != 1:
                raise InvalidArgument(
                    f"no token {which!r}" if not matches else f"{which!r} names several tokens"
                )
            self._write(tuple(c for c in clients if c is not matches[0]))
        return matches[0]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # Two `token add` at once must not lose one: serialise on a sidecar lock file.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._seen = None  # re-read under the lock
            yield
        finally:
            os.close(fd)

    def _write(self, clients: Sequence[McpClient]) -> None:
        doc = {"version": _VERSION, "tokens": [c.to_dict() for c in clients]}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        self._seen = None
