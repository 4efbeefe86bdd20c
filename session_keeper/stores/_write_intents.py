"""Store operations on the durable steps' write intents: recorded before a submit, fenced.

A browser step on Temporal or DBOS writes to the outside world under an idempotency key
the workflow derives, and must never submit it blindly twice. Which attempt may submit
unread cannot be left to the engine's own count of attempts (DBOS's resume of a
cancelled workflow starts counting again; a Temporal reset runs a step as new): so the
step records its intent here before it submits, and any attempt that finds one reads
the destination back first.

The intent is recorded in the same transaction as the renewal of the profile lease that
fences the submit: a holder fenced meanwhile records nothing (and submits nothing), and
the first attempt pays one more row in a transaction it ran anyway, not a round trip.
"""

from __future__ import annotations

from datetime import timedelta

from session_keeper._util.validate import check_age
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._profiles import check_profile_lease
from session_keeper.stores._records import ProfileLease, Pruned, WriteIntent
from session_keeper.stores._sql import Q, Step, as_dt, check_str, check_ttl
from session_keeper.stores._steps import PROFILE_LEASES, renew_lease


class WriteIntents(Engine):
    """``intend_write`` and ``prune_write_intents``."""

    @operation(write=True)
    def intend_write(self, lease: ProfileLease, ttl: timedelta, key: str) -> Step[WriteIntent]:
        """See :meth:`Store.intend_write`."""
        check_profile_lease(lease)
        check_ttl(ttl)
        check_str(key, "key")
        now = self._clock.now()
        # The fence first: a holder whose lease lapsed or was taken records no intent
        # (it must not submit either, and its intent would only cost the next holder a
        # readback it needs anyway when the write did go out).
        renewed = yield from renew_lease(PROFILE_LEASES, lease.profile, lease, ttl, now)
        # Never overwritten: the first recorder's row says since when the write may have
        # been sent, whoever asks later.
        rows = yield Q(
            "insert_write_intent",
            "INSERT INTO write_intents (key, profile, lease_token, recorded_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
            (key, lease.profile, lease.token, now),
            answer="changes",
        )
        if rows[0][0]:
            return WriteIntent(key=key, lease=renewed, first=True, recorded_at=now)
        found = yield Q(
            "select_write_intent", "SELECT recorded_at FROM write_intents WHERE key = ?", (key,)
        )
        return WriteIntent(key=key, lease=renewed, first=False, recorded_at=as_dt(found[0][0]))

    @operation(write=True)
    def prune_write_intents(self, *, older_than: timedelta) -> Step[Pruned]:
        """See :meth:`Store.prune_write_intents`."""
        cutoff = self._clock.now() - check_age(older_than)
        rows = yield Q(
            "prune_write_intents",
            "DELETE FROM write_intents WHERE recorded_at < ?",
            (cutoff,),
            answer="changes",
        )
        return Pruned(removed=int(rows[0][0]))
