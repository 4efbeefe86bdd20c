"""KeeperPool: many browser profiles, one keeper each, a bound on open browsers.

Why it is built this way:

- A profile is *leased* in the Store (``acquire_profile``) before its keeper loads
  its state or launches anything, renewed every ``lease_ttl / 3`` while it is open,
  and released when it is closed. A renewal the store refuses for a while (busy,
  unreachable) is retried with bounded backoff; a profile not renewed by
  ``lease_ttl - lease_ttl / 6`` after its last renewal was sent is fenced (its
  browser closed) before its lease can lapse, so it never has two drivers. Two
  pools (processes, machines) on one store never drive one profile; a holder that
  died is detected by expiry, and its late writes (the keeper's saves, through a
  store that fences them with the lease) are refused.
  The profile lock file on disk is only a local second line.
- At most ``max_open`` profiles are open. Opening another closes the least recently
  used one that no turn holds: its browser is closed exactly as an idle sweep closes
  it (logins deleted from the jar unless the keeper keeps them), its keeper saves and
  closes, its lease is given back. Its conversations learn it on their next
  ``ensure()`` as a restart with what it took, told once each — the keeper's own
  facts, so ``ensure()`` means the same through the pool as on one keeper.
- A conversation is routed once (``RoutingPolicy``) and stays on its profile.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, cast
from urllib.parse import quote

import attrs

from session_keeper._browser.backend import BrowserBackend, PageT
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.facade.settings import Durability
from session_keeper._keeper.tabs.replay import Replay
from session_keeper._model.facts import SweepReport, TurnFacts
from session_keeper._model.grants import check_name
from session_keeper._telemetry import Telemetry, instruments_for
from session_keeper._util.clock import SystemClock
from session_keeper._util.log_fields import log_extra
from session_keeper._util.redact import scrubbing_logger
from session_keeper._util.validate import check_duration, check_mapping
from session_keeper.errors import (
    InvalidArgument,
    InvalidArgumentType,
    KeeperClosedError,
    ProfileLeaseLost,
    StoreError,
)
from session_keeper.pool._routing import RoutingPolicy, SpreadRouting
from session_keeper.stores import ProfileLease

if TYPE_CHECKING:
    from session_keeper._keeper.tabs.conversation_tab import ConversationTab
    from session_keeper._util.clock import Clock
    from session_keeper.stores import Store

__all__ = ["KeeperFactory", "KeeperPool", "PoolStats"]

log = scrubbing_logger("session_keeper.pool")

#: Builds a profile's keeper: ``factory(profile, backend, store)``. It must pass
#: ``store`` (the pool's store, fenced with the profile's lease) to the keeper.
KeeperFactory = Callable[[str, BrowserBackend[PageT], "Store"], SessionKeeper[PageT]]


@attrs.frozen(kw_only=True)
class PoolStats:
    """What a pool did so far (counters since it was created)."""

    #: Profiles opened (lease acquired, keeper loaded).
    opened: int
    #: Open profiles closed to make room, whose browser was running.
    evictions: int
    #: Profiles closed because their lease was lost or could not be renewed in time (fenced).
    fenced: int
    #: Profiles open now, least recently used first.
    open_profiles: tuple[str, ...]


class _FencedStore:
    """The pool's store as one profile's keeper sees it: its saves fenced by the lease."""

    def __init__(self, store: Store, lease: Callable[[], ProfileLease | None]) -> None:
        self._store = store
        self._lease = lease

    async def __aenter__(self) -> Self:
        return self  # The pool opens and closes the real store.

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def save_keeper_state(self, keeper_id: str, state: Any, **kwargs: Any) -> None:
        lease = self._lease()
        if lease is None:
            raise ProfileLeaseLost("the profile's lease was given back; this keeper is fenced")
        await self._store.save_keeper_state_fenced(lease, keeper_id, state, **kwargs)

    async def save_keeper_rows(self, keeper_id: str, **kwargs: Any) -> None:
        lease = self._lease()
        if lease is None:
            raise ProfileLeaseLost("the profile's lease was given back; this keeper is fenced")
        await self._store.save_keeper_rows(keeper_id, **kwargs, fence=lease)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@attrs.define(eq=False)
class _Slot(Generic[PageT]):
    profile: str
    keeper: SessionKeeper[PageT]
    lease: ProfileLease | None
    #: The pool clock's monotonic reading when the current lease's acquisition or last
    #: renewal was *sent*: the store set its expiry no earlier than this plus the ttl.
    renewed_at: float
    busy: int = 0
    #: Renewals refused in a row by a transient store error.
    failures: int = 0


class KeeperPool(Generic[PageT]):
    """Several browser profiles, one :class:`SessionKeeper` each, at most ``max_open`` open.

    ``profiles`` maps a profile name to its backend (a :class:`PlaywrightBackend`
    with its own ``profile_dir``, a :class:`CdpBackend` endpoint, a ``FakeBackend``).
    ``owner`` names this pool in profile leases (one per process or machine). Use as
    ``async with KeeperPool(...) as pool:`` and call :meth:`ensure` at every turn as
    on one keeper; :meth:`hold` pins a conversation's profile open for a whole turn.

    Each profile's keeper is saved under ``keeper_id = "profile:<name>"`` unless
    ``keeper_factory`` builds it otherwise.

    ``telemetry``: where the pool's keepers (and its lease-loss counter) report spans
    and metrics (default: the global providers). ``replay``: record each profile's
    conversations (:class:`~session_keeper.Replay`), each profile in its own
    sub-directory ``<directory>/profile-<name>`` (a factory-built keeper records as it was
    built).

    Raises :class:`InvalidArgument` / :class:`InvalidArgumentType` for bad arguments
    (no profiles, ``max_open`` < 1, a routing policy that is not one).
    """

    def __init__(
        self,
        profiles: Mapping[str, BrowserBackend[PageT]],
        *,
        store: Store,
        owner: str,
        policy: RoutingPolicy | None = None,
        max_open: int = 3,
        lease_ttl: timedelta = timedelta(seconds=60),
        clock: Clock | None = None,
        keeper_factory: KeeperFactory[PageT] | None = None,
        telemetry: Telemetry | None = None,
        replay: Replay | None = None,
    ) -> None:
        profiles = check_mapping(profiles, "profiles")
        if not profiles:
            raise InvalidArgument("a pool needs at least one profile")
        for name in profiles:
            check_name(name, "profile")
        if not isinstance(max_open, int) or isinstance(max_open, bool):
            raise InvalidArgumentType("max_open must be an int")
        if max_open < 1:
            raise InvalidArgument("max_open must be at least 1")
        if policy is not None and not isinstance(policy, RoutingPolicy):
            raise InvalidArgumentType("policy must implement RoutingPolicy")
        check_duration(lease_ttl, "lease_ttl")
        if replay is not None and not isinstance(replay, Replay):
            raise InvalidArgumentType(f"replay must be a Replay, not {type(replay).__name__}")
        self._replay = replay
        self._instruments = instruments_for(telemetry)
        self._backends = dict(profiles)
        self._names: tuple[str, ...] = tuple(profiles)
        self._store = store
        self._owner = check_name(owner, "owner")
        self._policy: RoutingPolicy = policy if policy is not None else SpreadRouting()
        self._max_open = max_open
        self._lease_ttl = lease_ttl
        self._clock = clock
        self._time: Clock = clock if clock is not None else SystemClock()
        self._factory = keeper_factory
        self._routes: dict[str, str] = {}
        self._open: OrderedDict[str, _Slot[PageT]] = OrderedDict()
        self._lock = asyncio.Lock()
        self._changed = asyncio.Condition(self._lock)
        self._waiters = 0
        self._renewer: asyncio.Task[None] | None = None
        self._closed = False
        self._opened = 0
        self._evictions = 0
        self._fenced = 0

    # -- lifetime ---------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._closed:
            raise KeeperClosedError("this pool was closed; create a new one")
        if self._renewer is None:
            self._renewer = asyncio.create_task(self._renew_forever())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every open profile (browser closed cleanly, keeper saved, lease given
        back). Idempotent. Raises the first error a keeper's close raised, after all."""
        if self._closed:
            return
        self._closed = True
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        first: BaseException | None = None
        async with self._lock:
            for slot in list(self._open.values()):
                try:
                    await self._close(slot, evict=False)
                except Exception as exc:  # every profile is closed; the first error is raised
                    first = first or exc
            # Callers waiting for a free slot must learn now that the pool closed.
            self._changed.notify_all()
        if first is not None:
            raise first

    # -- views ------------------------------------------------------------------------

    @property
    def owner(self) -> str:
        """The name this pool's profile leases are held under."""
        return self._owner

    @property
    def profiles(self) -> tuple[str, ...]:
        """Every profile's name."""
        return self._names

    @property
    def max_open(self) -> int:
        """The most profiles (browsers) open at once."""
        return self._max_open

    def stats(self) -> PoolStats:
        """Counters and the open profiles (no round trip)."""
        return PoolStats(
            opened=self._opened,
            evictions=self._evictions,
            fenced=self._fenced,
            open_profiles=tuple(self._open),
        )

    def profile_of(self, conversation: str) -> str | None:
        """The profile ``conversation`` was routed to, or ``None`` before its first turn."""
        return self._routes.get(conversation)

    def open_keeper(self, profile: str) -> SessionKeeper[PageT] | None:
        """The keeper of ``profile`` while it is open, else ``None``."""
        slot = self._open.get(profile)
        return slot.keeper if slot is not None else None

    def keeper(self, conversation: str) -> SessionKeeper[PageT]:
        """The open keeper serving ``conversation`` (for :meth:`SessionKeeper.tab`, ...).

        Raises :class:`InvalidArgument` when its profile is not open (call
        :meth:`ensure` first, or use :meth:`hold` to keep it open for the turn).
        """
        profile = self._routes.get(conversation)
        slot = self._open.get(profile) if profile is not None else None
        if slot is None:
            raise InvalidArgument(f"{conversation!r} has no open profile; call ensure() first")
        return slot.keeper

    # -- the turn ---------------------------------------------------------------------

    async def ensure(
        self,
        conversation: str,
        *,
        site: str | None = None,
        account: str | None = None,
        turn: str | None = None,
    ) -> TurnFacts:
        """Start a turn: as :meth:`SessionKeeper.ensure`, on the conversation's profile.

        The first call routes the conversation (``site``/``account`` inform the
        policy); the profile is opened if needed (its lease acquired, the least
        recently used profile closed to make room). Raises what the keeper's
        ``ensure()`` raises, :class:`~session_keeper.ProfileHeld` when another holder
        leases the profile, :class:`InvalidArgument` when the policy names no profile
        or an unknown one, and :class:`KeeperClosedError` after :meth:`aclose`.
        """
        async with self.hold(conversation, site=site, account=account) as keeper:
            return await keeper.ensure(conversation, turn=turn)

    async def tab(self, conversation: str, url: str | None = None) -> ConversationTab:
        """The conversation's tab (see :meth:`SessionKeeper.tab`) on its open profile."""
        return await self.keeper(conversation).tab(conversation, url)

    @contextlib.asynccontextmanager
    async def hold(
        self, conversation: str, *, site: str | None = None, account: str | None = None
    ) -> AsyncIterator[SessionKeeper[PageT]]:
        """``async with pool.hold(conv) as keeper:`` — the conversation's keeper, its
        profile open and not evicted until the block ends. Raises as :meth:`ensure`."""
        conversation = check_name(conversation, "conversation")
        profile = self._route(conversation, site, account)
        slot = await self._take(profile)
        try:
            yield slot.keeper
        finally:
            # No lock to end a turn (an eviction may hold it for a while); only a caller
            # waiting for a free slot needs waking, and it waits with the lock released.
            slot.busy -= 1
            if self._waiters:
                async with self._lock:
                    self._changed.notify_all()

    async def sweep(self) -> dict[str, SweepReport]:
        """Sweep every open profile no turn holds; a profile whose browser the sweep
        closed (idle) is closed and its lease given back. Returns the reports."""
        self._check_open()
        reports: dict[str, SweepReport] = {}
        async with self._lock:
            for slot in [s for s in self._open.values() if s.busy == 0]:
                reports[slot.profile] = report = await slot.keeper.sweep()
                # A turn may have taken the slot while the sweep ran: it relaunches there.
                if report.closed_browser is not None and slot.busy == 0:
                    await self._close(slot, evict=False)
            self._changed.notify_all()
        return reports

    async def close_profile(self, profile: str) -> bool:
        """Close ``profile`` now if it is open (browser closed cleanly, keeper saved,
        lease given back), waiting for turns that hold it. Returns whether it was open.

        A job worker does this after each job, so another worker may lease the profile.
        """
        self._check_open()
        async with self._lock:
            while True:
                slot = self._open.get(profile)
                if slot is None:
                    return False
                if slot.busy == 0:
                    break
                await self._wait_for_change()
            await self._close(slot, evict=False)
            self._changed.notify_all()
            return True

    # -- internals --------------------------------------------------------------------

    async def _wait_for_change(self) -> None:
        """Wait (``self._lock`` held) until a turn ends or a profile closes."""
        self._waiters += 1
        try:
            await self._changed.wait()
        finally:
            self._waiters -= 1

    def _check_open(self) -> None:
        if self._closed:
            raise KeeperClosedError("this pool was closed")

    def _route(self, conversation: str, site: str | None, account: str | None) -> str:
        known = self._routes.get(conversation)
        if known is not None:
            return known
        for value, what in ((site, "site"), (account, "account")):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentType(f"{what} must be a str")
        chosen = self._policy.route(conversation, site=site, account=account, profiles=self._names)
        if chosen is None:
            raise InvalidArgument(f"the routing policy names no profile for {conversation!r}")
        if chosen not in self._backends:
            raise InvalidArgument(f"the routing policy named an unknown profile {chosen!r}")
        self._routes[conversation] = chosen
        return chosen

    async def _take(self, profile: str) -> _Slot[PageT]:
        self._check_open()
        slot = self._open.get(profile)
        if slot is not None:
            # The alive path takes no lock: nothing awaits between the lookup and the
            # count, and a slot leaves ``_open`` (synchronously) before it is closed, so
            # a turn never waits behind another profile's eviction or load.
            slot.busy += 1
            self._open.move_to_end(profile)
            return slot
        async with self._lock:
            while True:
                self._check_open()
                slot = self._open.get(profile)
                if slot is not None:
                    break
                if len(self._open) < self._max_open:
                    slot = await self._open_profile(profile)
                    break
                victim = next((s for s in self._open.values() if s.busy == 0), None)
                if victim is None:
                    # Every open profile is inside a turn: wait for one to end.
                    await self._wait_for_change()
                    continue
                await self._close(victim, evict=True)
            slot.busy += 1
            self._open.move_to_end(profile)
            return slot

    async def _open_profile(self, profile: str) -> _Slot[PageT]:
        """Lease the profile, then build and load its keeper (under ``self._lock``)."""
        sent = self._time.monotonic()
        lease = await self._store.acquire_profile(profile, self._owner, self._lease_ttl)
        holder: list[_Slot[PageT]] = []
        fenced = cast("Store", _FencedStore(self._store, lambda: holder[0].lease))
        backend = self._backends[profile]
        try:
            if self._factory is not None:
                keeper = self._factory(profile, backend, fenced)
                if not isinstance(keeper, SessionKeeper) or keeper.store is not fenced:
                    raise InvalidArgument("keeper_factory must build a keeper on the store given")
            else:
                keeper = SessionKeeper(
                    backend,
                    durability=Durability(store=fenced, keeper_id=f"profile:{profile}"),
                    clock=self._clock,
                    telemetry=self._instruments.settings,
                    replay=self._replay_of(profile),
                )
            slot = _Slot(profile=profile, keeper=keeper, lease=lease, renewed_at=sent)
            holder.append(slot)
            await keeper.__aenter__()
        except BaseException:
            with contextlib.suppress(StoreError):
                await self._store.release_profile(lease)
            raise
        self._open[profile] = slot
        self._opened += 1
        log.info("profile opened", extra=log_extra(profile=profile, token=lease.token))
        return slot

    def _replay_of(self, profile: str) -> Replay | None:
        if self._replay is None:
            return None
        # "profile-" first: a profile named ".." is a name, not a way out.
        folder = "profile-" + quote(profile, safe="")
        return attrs.evolve(self._replay, directory=self._replay.directory / folder)

    async def _close(self, slot: _Slot[PageT], *, evict: bool) -> None:
        """Close a profile (under ``self._lock``): browser, keeper, then its lease."""
        self._open.pop(slot.profile, None)
        try:
            if evict:
                report = await slot.keeper.sweep(close_browser=True)
                if report.closed_browser is not None:
                    self._evictions += 1
                    log.info("profile evicted", extra=log_extra(profile=slot.profile))
            await slot.keeper.aclose()
        finally:
            lease, slot.lease = slot.lease, None
            if lease is not None:
                try:
                    await self._store.release_profile(lease)
                except ProfileLeaseLost:
                    log.warning(
                        "profile lease was lost before release",
                        extra=log_extra(profile=slot.profile),
                    )

    async def _renew_forever(self) -> None:
        loop = asyncio.get_running_loop()
        every = self._lease_ttl.total_seconds() / 3
        last_full = loop.time()
        retry_in: float | None = None
        # Checks the flag as well as being cancelled: a cancellation that lands while a
        # renewal awaits the store or a keeper's close may be absorbed below us.
        while not self._closed:
            # Every profile is renewed every ``every``; one whose renewal failed is
            # retried sooner, without moving the others' schedule.
            wait = last_full + every - loop.time()
            if retry_in is not None:
                wait = min(wait, retry_in)
            await asyncio.sleep(max(wait, 0.0))
            if self._closed:
                break
            full = loop.time() >= last_full + every
            if full:
                last_full = loop.time()
            _, retry_in = await self._renew_round(only_failing=not full)

    async def renew(self) -> None:
        """Renew every open profile's lease now (the pool does it every ``lease_ttl / 3``).

        A profile whose lease was lost (it expired and maybe was taken over) is fenced:
        its browser is closed and its keeper dropped without saving; the next turn
        routed to it opens it afresh (and fails with ProfileHeld while another holds it).
        So is a profile the store could not renew (busy, unreachable) for so long that
        its lease could lapse before the next try. Raises the first error a renewal
        met other than a lost lease (:class:`StoreBusy`, ...), after trying every
        profile; the pool's own renewer retries those with bounded backoff.
        """
        errors, _ = await self._renew_round(only_failing=False)
        if errors:
            raise errors[0]

    async def confirm_lease(self, conversation: str) -> None:
        """Renew the lease of ``conversation``'s open profile now, before an act that must
        not come from a stale holder (an external write): the store's answer, not this
        pool's belief, says the lease is still ours.

        Raises :class:`~session_keeper.errors.ProfileLeaseLost` when it is not (it
        expired while this process was paused, and perhaps another holder took it): the
        profile is fenced (its browser closed, its keeper dropped) before this returns.
        So it does when the profile was fenced (or closed) already, by the pool's own
        renewer waking from the same pause first: the caller's keeper is not this pool's
        any more, a retry on a fresh one may succeed. Raises :class:`InvalidArgument`
        when the conversation never had a turn in this pool.
        """

        async def renew(lease: ProfileLease) -> ProfileLease:
            return await self._store.renew_profile(lease, self._lease_ttl)

        await self._confirm(conversation, renew)

    async def confirm_write(self, conversation: str, key: str) -> bool:
        """:meth:`confirm_lease`, recording in the same store transaction that this
        holder is about to submit the external write ``key`` (its idempotency key).

        Returns ``True`` when no one recorded ``key`` before: only then may the write go
        out without reading the destination back first. A holder that lost its lease
        records nothing (:class:`~session_keeper.errors.ProfileLeaseLost`, as
        :meth:`confirm_lease`).
        """
        if not isinstance(key, str):
            raise InvalidArgumentType(f"key must be a str, not {type(key).__name__}")
        if not key.strip():
            raise InvalidArgument("key must not be empty")
        first = False

        async def renew(lease: ProfileLease) -> ProfileLease:
            nonlocal first
            intent = await self._store.intend_write(lease, self._lease_ttl, key)
            first = intent.first
            return intent.lease

        await self._confirm(conversation, renew)
        return first

    async def _confirm(
        self, conversation: str, renew: Callable[[ProfileLease], Awaitable[ProfileLease]]
    ) -> None:
        conversation = check_name(conversation, "conversation")
        profile = self._routes.get(conversation)
        if profile is None:
            raise InvalidArgument(f"{conversation!r} has no profile in this pool")
        async with self._lock:
            slot = self._open.get(profile)
            if slot is None or slot.lease is None:
                raise ProfileLeaseLost(
                    f"profile {profile!r} is no longer open in this pool (fenced or closed)"
                )
            ttl = self._lease_ttl.total_seconds()
            sent = self._time.monotonic()
            if sent >= slot.renewed_at + ttl:
                # Past its expiry by our own clock: the store may still say it is ours
                # (nobody took it), but another holder could have: fence it.
                lease = slot.lease
                await self._fence(slot)
                raise ProfileLeaseLost(f"the lease of profile {lease.profile!r} expired")
            try:
                slot.lease = await renew(slot.lease)
            except ProfileLeaseLost:
                await self._fence(slot)
                raise
            slot.renewed_at = sent
            slot.failures = 0

    async def _renew_round(self, *, only_failing: bool) -> tuple[list[Exception], float | None]:
        """Try each open profile's renewal once; returns the errors met and, when some
        profile still needs renewing, how long to wait before retrying it."""
        ttl = self._lease_ttl.total_seconds()
        margin = ttl / 6  # left for closing the browser when fencing
        errors: list[Exception] = []
        retry_in: float | None = None
        async with self._lock:
            for slot in list(self._open.values()):
                lease = slot.lease
                if lease is None or (only_failing and slot.failures == 0):
                    continue
                fence_at = slot.renewed_at + ttl - margin
                sent = self._time.monotonic()
                try:
                    if sent >= fence_at:
                        raise TimeoutError
                    # Never wait on the store past the point where the lease could lapse.
                    async with asyncio.timeout(fence_at - sent):
                        slot.lease = await self._store.renew_profile(lease, self._lease_ttl)
                except ProfileLeaseLost:
                    await self._fence(slot)
                    continue
                except Exception as exc:  # busy, unreachable, broken: not renewed either way
                    if not isinstance(exc, TimeoutError):
                        errors.append(exc)
                    slot.failures += 1
                    left = fence_at - self._time.monotonic()
                    if left <= 0:
                        log.warning(
                            "profile lease not renewed in time; fenced",
                            extra=log_extra(profile=slot.profile, failures=slot.failures),
                        )
                        await self._fence(slot, release=lease)
                        continue
                    # Bounded exponential backoff, never past the fencing point.
                    backoff = min(ttl / 60 * 2 ** (slot.failures - 1), ttl / 12, left)
                    retry_in = backoff if retry_in is None else min(retry_in, backoff)
                    continue
                slot.renewed_at = sent
                slot.failures = 0
            self._changed.notify_all()
        return errors, retry_in

    async def _fence(self, slot: _Slot[PageT], *, release: ProfileLease | None = None) -> None:
        """Stop driving ``slot``'s profile: its browser closed, its keeper dropped.

        ``release`` is a lease still ours (not renewed in time, not lost): given back
        afterwards if the store allows, so another holder need not wait for expiry.
        """
        self._open.pop(slot.profile, None)
        slot.lease = None
        self._fenced += 1
        # Lost, or given up before it could lapse: either way this pool no longer drives it.
        self._instruments.add(
            "session_keeper.lease_losses", 1, {"session_keeper.lease.kind": "profile"}
        )
        if release is None:
            log.warning("profile lease lost; fenced", extra=log_extra(profile=slot.profile))
        # Its saves are refused now (no lease): close the browser, expect the save to fail.
        with contextlib.suppress(StoreError):
            await slot.keeper.aclose()
        if release is not None:
            # Only once the browser is closed; the store may still be failing.
            with contextlib.suppress(StoreError, TimeoutError):
                async with asyncio.timeout(self._lease_ttl.total_seconds() / 6):
                    await self._store.release_profile(release)

    def __repr__(self) -> str:
        return (
            f"<KeeperPool {self._owner!r} profiles={len(self._names)} "
            f"open={list(self._open)} max_open={self._max_open}>"
        )
