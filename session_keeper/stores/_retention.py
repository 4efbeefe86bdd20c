"""Retention: what the store may forget, so it stays bounded under a long run.

Two operations, each one transaction:

- :meth:`Retention.prune_events` removes events older than a cut-off, except the
  audit chain (verified whole, never removed) and, for every job still in the store,
  the newest event of each kind (what the job loop reads: the last lease claim, page
  commit, human pause, human resume). It records the pass in ``event_archive`` first;
  the database itself refuses any other deletion from the log.
- :meth:`Retention.prune_results` removes the results of jobs that ended (``done``,
  ``failed``, ``stopped``) before a cut-off. The job itself, its final checkpoint and
  its external-write records stay: a resubmitted contract is still recognised (and not
  run twice), and what it did outside stays on record.
"""

from __future__ import annotations

from datetime import timedelta

from session_keeper.errors import InvalidArgument, InvalidArgumentType
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._records import TERMINAL_STATES, Pruned
from session_keeper.stores._schema import KEPT_EVENT_KINDS
from session_keeper.stores._sql import Q, Step


def _check_age(older_than: object) -> timedelta:
    if not isinstance(older_than, timedelta):
        raise InvalidArgumentType(
            f"older_than must be a timedelta, not {type(older_than).__name__}"
        )
    if older_than < timedelta(0):
        raise InvalidArgument("older_than must not be negative")
    return older_than


def _placeholders(n: int) -> str:
    return ", ".join("?" * n)


class Retention(Engine):
    """``prune_events`` and ``prune_results``."""

    @operation(write=True)
    def prune_events(self, *, older_than: timedelta) -> Step[Pruned]:
        """See :meth:`Store.prune_events`."""
        cutoff = self._clock.now() - _check_age(older_than)
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
    def prune_results(self, *, older_than: timedelta) -> Step[Pruned]:
        """See :meth:`Store.prune_results`."""
        cutoff = self._clock.now() - _check_age(older_than)
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
