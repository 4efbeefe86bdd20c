"""Store operations on artifacts: content-addressed bytes a page commit may reference."""

from __future__ import annotations

from datetime import datetime, timedelta

from session_keeper.errors import (
    ArtifactNotFound,
    InvalidArgument,
    InvalidArgumentType,
    StoreCorrupt,
)
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._records import ArtifactRef
from session_keeper.stores._sql import Q, Step, check_str, digest_of


def write_referenced(ref: ArtifactRef, data: bytes, now: datetime) -> Step[None]:
    """Store ``data`` as ``ref``'s artifact, referenced, and read it back: inside the
    page commit's transaction, so the artifact exists exactly when the checkpoint
    naming it does (a fenced or failed commit writes neither)."""
    # One statement writes, marks referenced (no collection may take it) and reads back
    # what the row holds: a row already stored under this digest with other bytes (a
    # damaged one) fails the commit instead of being named by the checkpoint.
    rows = yield Q(
        "write_artifact",
        "INSERT INTO artifacts (digest, size, data, created_at, referenced_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (digest) DO UPDATE SET "
        "created_at = excluded.created_at, referenced_at = excluded.referenced_at "
        "RETURNING size, data",
        (ref.digest, ref.size, data, now, now),
    )
    size, stored = rows[0]
    stored = bytes(stored)
    if size != ref.size or len(stored) != ref.size or digest_of(stored) != ref.digest:
        raise StoreCorrupt(f"artifact {ref.digest} read back differently")


class Artifacts(Engine):
    """``put_artifact``, ``read_artifact`` and ``collect_unreferenced_artifacts``."""

    async def put_artifact(self, data: bytes, *, name: str) -> ArtifactRef:
        """See :meth:`Store.put_artifact`."""
        ref_name = check_str(name, "name")
        # Verified in a separate, later transaction: what we read back is what was
        # committed, not what is still sitting in this transaction's buffers.
        digest, stored = await self._perform_then_read(
            lambda: self._write_artifact(data), self._select_artifact
        )
        if digest_of(stored) != digest or len(stored) != len(data):
            raise StoreCorrupt(f"artifact {digest} read back differently")
        return ArtifactRef(name=ref_name, digest=digest, size=len(stored))

    def _write_artifact(self, data: bytes) -> Step[str]:
        # Stored under its digest; re-writing refreshes the collection grace.
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgumentType("artifact data must be bytes")
        blob = bytes(data)
        digest = digest_of(blob)
        yield Q(
            "insert_artifact",
            "INSERT INTO artifacts (digest, size, data, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (digest) DO UPDATE SET created_at = excluded.created_at",
            (digest, len(blob), blob, self._clock.now()),
        )
        return digest

    @operation(write=False)
    def read_artifact(self, digest: str) -> Step[bytes]:
        """See :meth:`Store.read_artifact`."""
        return (yield from self._select_artifact(digest))

    def _select_artifact(self, digest: str) -> Step[bytes]:
        check_str(digest, "digest")
        rows = yield Q("select_artifact", "SELECT data FROM artifacts WHERE digest = ?", (digest,))
        if not rows:
            raise ArtifactNotFound(f"no artifact {digest}")
        data = bytes(rows[0][0])
        if digest_of(data) != digest:
            raise StoreCorrupt(f"artifact {digest} does not match its digest")
        return data

    async def collect_unreferenced_artifacts(self, *, older_than: timedelta) -> int:
        """See :meth:`Store.collect_unreferenced_artifacts`."""
        collected = await self._perform(
            lambda: self._collect(older_than), write=True, name="collect_artifacts"
        )
        return len(collected)

    def _collect(self, older_than: timedelta) -> Step[list[str]]:
        if not isinstance(older_than, timedelta) or older_than < timedelta(0):
            raise InvalidArgument("older_than must be a non-negative timedelta")
        cutoff = self._clock.now() - older_than
        candidates = yield Q(
            "select_unreferenced",
            "SELECT digest FROM artifacts WHERE created_at < ? AND referenced_at IS NULL",
            (cutoff,),
            # Skip artifacts a commit is referencing right now (it holds their row lock).
            " FOR UPDATE SKIP LOCKED",
        )
        collected: list[str] = []
        for (digest,) in candidates:
            rows = yield Q(
                "delete_artifact",
                "DELETE FROM artifacts WHERE digest = ? AND referenced_at IS NULL RETURNING digest",
                (digest,),
            )
            collected.extend(str(r[0]) for r in rows)
        return collected
