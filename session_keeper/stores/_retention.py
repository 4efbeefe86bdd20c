"""Retention: what the store may forget, so it stays bounded under a long run.

Three operations, each one transaction:

- :meth:`Retention.prune_events` removes events older than a cut-off, except the
  audit chain (see the next) and, for every job still in the store,
  the newest event of each kind (what the job loop reads: the last lease claim, page
  commit, human pause, human resume). It records the pass in ``event_archive`` first;
  the database itself refuses any other deletion from the log.
- :meth:`Retention.archive_audit` removes the audit chain's oldest part, up to a sealed
  head older than a cut-off, and writes the sealed mark the chain goes on from (the
  caller, :meth:`AuditLog.archive`, seals it: the store never holds the keys). It
  records the pass in ``audit_archive`` first; the database refuses the deletion of
  any chain event above that row, and of any mark.
- :meth:`Retention.prune_results` removes the results of jobs that ended (``done``,
  ``failed``, ``stopped``) before a cut-off. The job itself, its final checkpoint and
  its external-write records stay: a resubmitted contract is still recognised (and not
  run twice), and what it did outside stays on record.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from session_keeper._model.events import AUDIT_ARCHIVE_KIND, AUDIT_ENTRY_KIND, AUDIT_HEAD_KIND
from session_keeper._util.validate import check_age
from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._jobs import event_from_row
from session_keeper.stores._records import EVENT_COLUMNS, TERMINAL_STATES, Event, Pruned
from session_keeper.stores._schema import ARCHIVED_EVENT_KINDS, KEPT_EVENT_KINDS
from session_keeper.stores._sql import Q, Step
from session_keeper.stores._steps import event_values, insert_event

_EVENT_SELECT = ", ".join(("id", "at", "kind", *EVENT_COLUMNS, "data"))


def _placeholders(n: int) -> str:
    return ", ".join("?" * n)


class Retention(Engine):
    """``prune_events`` and ``prune_results``."""

    @operation(write=True)
    def prune_events(self, *, older_than: timedelta) -> Step[Pruned]:
        """See :meth:`Store.prune_events`."""
        cutoff = self._clock.now() - check_age(older_than)
        rows = yield Q("select_prune_mark", "SELECT MAX(id) FROM events WHERE at < ?", (cutoff,))
        through = rows[0][0] if rows else None
        if through is None:
            return Pruned(removed=0)
        kept = KEPT_EVENT_KINDS
        # The newest event of each kind of each job still stored stays: the job loop
        # reads exactly those (its budgets, pauses and dead-controller check).
        removable = (
            f"id <= ? AND kind NOT IN ({_placeholders(len(kept))}) AND NOT ("
            "job_id IS NOT NULL AND job_id IN (SELECT job_id FROM jobs) AND id = ("
            "SELECT MAX(e.id) FROM events e WHERE e.job_id = events.job_id AND e.kind = events.kind"
            "))"
        )
        params = (int(through), *kept)
        counted = yield Q(
            "count_prunable", f"SELECT COUNT(*) FROM events WHERE {removable}", params
        )
        removed = int(counted[0][0])
        # The archive row first: the log's trigger lets a delete through only below it.
        yield Q(
            "insert_event_archive",
            "INSERT INTO event_archive (through_id, removed, archived_at) VALUES (?, ?, ?)",
            (int(through), removed, self._clock.now()),
        )
        if removed:
            yield Q("prune_events", f"DELETE FROM events WHERE {removable}", params)
        return Pruned(removed=removed, through_id=int(through))

    @operation(write=True)
    def archive_audit(
        self, *, older_than: timedelta, mark: Callable[[Event, Event | None], Event]
    ) -> Step[Pruned]:
        """See :meth:`Store.archive_audit`."""
        cutoff = self._clock.now() - check_age(older_than)
        if not callable(mark):
            raise InvalidArgumentType(f"mark must be callable, not {type(mark).__name__}")
        heads = yield Q(
            "select_archive_cut",
            f"SELECT {_EVENT_SELECT} FROM events WHERE kind = ? AND at < ? "
            "ORDER BY id DESC LIMIT 1",
            (AUDIT_HEAD_KIND, cutoff),
        )
        if not heads:
            return Pruned(removed=0)
        head = event_from_row(heads[0])
        entries = yield Q(
            "select_archive_entry",
            f"SELECT {_EVENT_SELECT} FROM events WHERE kind = ? AND id < ? "
            "ORDER BY id DESC LIMIT 1",
            (AUDIT_ENTRY_KIND, head.id),
        )
        # Sealed (and checked) by the caller, inside this transaction: a forged cut
        # raises here, before anything is written.
        archived = mark(head, event_from_row(entries[0]) if entries else None)
        if not isinstance(archived, Event) or archived.kind != AUDIT_ARCHIVE_KIND:
            raise InvalidArgumentType(f"mark must return an Event of kind {AUDIT_ARCHIVE_KIND!r}")
        through_seq = archived.data.get("seq")
        if not isinstance(through_seq, int) or isinstance(through_seq, bool):
            raise InvalidArgument("the archive mark must name the seq of its last entry")
        kinds = ", ".join("?" * len(ARCHIVED_EVENT_KINDS))
        removable = f"kind IN ({kinds}) AND id <= ?"
        params = (*ARCHIVED_EVENT_KINDS, head.id)
        counted = yield Q(
            "count_archivable", f"SELECT COUNT(*) FROM events WHERE {removable}", params
        )
        removed = int(counted[0][0])
        # The archive row first: the log's trigger lets the chain's rows go only below it.
        yield Q(
            "insert_audit_archive",
            "INSERT INTO audit_archive (through_id, through_seq, removed, archived_at) "
            "VALUES (?, ?, ?, ?)",
            (head.id, through_seq, removed, self._clock.now()),
        )
        yield from insert_event(event_values(archived))
        yield Q("archive_audit", f"DELETE FROM events WHERE {removable}", params)
        return Pruned(removed=removed, through_id=head.id)

    @operation(write=True)
    def prune_results(self, *, older_than: timedelta) -> Step[Pruned]:
        """See :meth:`Store.prune_results`."""
        cutoff = self._clock.now() - check_age(older_than)
        states = tuple(sorted(TERMINAL_STATES))
        ended = (
            "SELECT job_id FROM checkpoints "
            f"WHERE state IN ({_placeholders(len(states))}) AND updated_at < ?"
        )
        params = (*states, cutoff)
        counted = yield Q(
            "count_prunable_results",
            f"SELECT COUNT(*) FROM results WHERE job_id IN ({ended})",
            params,
        )
        removed = int(counted[0][0])
        if removed:
            yield Q("prune_results", f"DELETE FROM results WHERE job_id IN ({ended})", params)
        return Pruned(removed=removed)
