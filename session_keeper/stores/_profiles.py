"""Store operations on profile leases: which holder may drive which browser profile.

A profile lease is a job lease for a browser profile: acquired with a TTL, renewed
by its holder, released, and taken over only after it expired. Every acquisition
grows the profile's fencing token, and a write fenced with a lease
(``save_keeper_state(..., fence=lease)``) is checked against the row in the same
transaction, so a holder that stalled past its expiry cannot write after another
took the profile over. Each acquisition, takeover and release is an event, so who
held which profile when can be read back from the log.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from session_keeper._model.events import EventKind
from session_keeper.errors import InvalidArgumentType, ProfileHeld
from session_keeper.stores._engine import Engine, operation
from session_keeper.stores._records import ProfileLease
from session_keeper.stores._sql import Q, Step, as_dt, check_str, check_ttl
from session_keeper.stores._steps import (
    PROFILE_LEASES,
    lock_held,
    lock_lease_row,
    release_lease,
    renew_lease,
    take_lease,
)

#: The event kinds profile leases write (``data["profile"]`` names the profile).
PROFILE_ACQUIRED: EventKind = "profile_acquired"
PROFILE_RELEASED: EventKind = "profile_released"


def check_profile_lease(lease: object) -> ProfileLease:
    """A :class:`ProfileLease`."""
    if not isinstance(lease, ProfileLease):
        raise InvalidArgumentType(f"lease must be a ProfileLease, not {type(lease).__name__}")
    return lease


def lock_profile(lease: ProfileLease, now: datetime) -> Step[None]:
    """Lock the profile's row and check ``lease`` is its current, unexpired lease."""
    yield from lock_held(PROFILE_LEASES, lease.profile, lease, now)


class ProfileLeases(Engine):
    """``acquire_profile``, ``renew_profile``, ``release_profile`` and ``profile_lease``."""

    @operation(write=True)
    def acquire_profile(self, profile: str, owner: str, ttl: timedelta) -> Step[ProfileLease]:
        """See :meth:`Store.acquire_profile`."""
        check_str(profile, "profile")
        check_str(owner, "owner")
        check_ttl(ttl)
        now = self._clock.now()
        # The row is created once and never deleted, so the token only grows. Two
        # first acquirers race on the primary key; the loser's insert does nothing.
        yield Q(
            "insert_profile",
            "INSERT INTO profile_leases (profile, owner, token, expires_at) "
            "VALUES (?, NULL, 0, NULL) ON CONFLICT (profile) DO NOTHING",
            (profile,),
        )
        rows = yield from lock_lease_row(PROFILE_LEASES, profile)
        return (
            yield from take_lease(
                PROFILE_LEASES,
                profile,
                rows[0],
                ttl=ttl,
                now=now,
                new=lambda token, expires_at: ProfileLease(
                    profile=profile, owner=owner, token=token, expires_at=expires_at
                ),
                held=ProfileHeld,
                event={
                    "kind": PROFILE_ACQUIRED,
                    "at": now,
                    "lease_owner": owner,
                    "data": {"profile": profile},
                },
            )
        )

    @operation(write=True)
    def renew_profile(self, lease: ProfileLease, ttl: timedelta) -> Step[ProfileLease]:
        """See :meth:`Store.renew_profile`."""
        check_profile_lease(lease)
        check_ttl(ttl)
        return (
            yield from renew_lease(PROFILE_LEASES, lease.profile, lease, ttl, self._clock.now())
        )

    @operation(write=True)
    def release_profile(self, lease: ProfileLease) -> Step[None]:
        """See :meth:`Store.release_profile`."""
        check_profile_lease(lease)
        now = self._clock.now()
        yield from release_lease(
            PROFILE_LEASES,
            lease.profile,
            lease,
            now,
            {
                "kind": PROFILE_RELEASED,
                "at": now,
                "lease_owner": lease.owner,
                "data": {"profile": lease.profile, "token": lease.token},
            },
        )

    @operation(write=False)
    def profile_lease(self, profile: str) -> Step[ProfileLease | None]:
        """See :meth:`Store.profile_lease`."""
        check_str(profile, "profile")
        rows = yield Q(
            "select_profile",
            "SELECT owner, token, expires_at FROM profile_leases WHERE profile = ?",
            (profile,),
        )
        if not rows or rows[0][0] is None or rows[0][2] is None:
            return None
        owner, token, expires_at = rows[0]
        return ProfileLease(
            profile=profile, owner=owner, token=int(token), expires_at=as_dt(expires_at)
        )
