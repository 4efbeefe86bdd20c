"""Human pauses: what a person needs to take over, resuming, cancelling and expiry.

A job paused for a missing login (``login_site``) resumes only once a login to that
site is recorded after the pause; a pause nobody answers within ``pause_ttl`` stops.
"""

from __future__ import annotations

from datetime import datetime
from typing import Generic

import attrs

from session_keeper._browser.backend import PageT
from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.logins.renewal import Renewal
from session_keeper._model.cookies import normalize_site
from session_keeper.errors import (
    BrowserError,
    InvalidArgument,
    LeaseHeldError,
    LoginStillMissing,
    PolicyRefusal,
)
from session_keeper.jobs._lease import held_lease, release_quietly
from session_keeper.jobs._origins import conversation_of, is_login_page
from session_keeper.jobs._outcome import Stop
from session_keeper.jobs._settings import LoopSettings
from session_keeper.stores import Event, Store
from session_keeper.stores._records import Checkpoint, JobContract


@attrs.frozen(kw_only=True)
class HumanPause:
    """What a person needs to take over, persisted with the pause."""

    reason: str
    target_identity: str | None
    last_revision: int
    last_committed_step: str | None
    allowed_next_action: str
    expires_at: datetime
    #: The site whose login the job waits for; ``resume()`` refuses until a login to it
    #: is recorded after the pause (``None``: the pause is not about a missing login).
    login_site: str | None = None


def pause_document(pause: HumanPause) -> dict[str, object]:
    """The pause as the ``human_pause`` event's data (``expires_at`` in ISO form)."""
    doc = attrs.asdict(pause)
    doc["expires_at"] = pause.expires_at.isoformat()
    return doc


async def found_signed_out(
    keeper: SessionKeeper[PageT], contract: JobContract, conversation: str
) -> bool:
    """After a failed step: the sign-in page is shown, or the site's probe sees nobody?"""
    if is_login_page(keeper.current_url(conversation), contract.login_url):
        return True
    if contract.site is None or not keeper.has_login_probe(contract.site):
        return False
    try:
        return await keeper.probe_login(contract.site) is None
    except (BrowserError, PolicyRefusal):
        return False  # a failed, refused probe or a dead browser cannot tell; the class stands


async def renewal_for_job(keeper: SessionKeeper[PageT], contract: JobContract) -> Renewal | None:
    """Renew the job's lost login when its action's restart policy is ``relogin`` and the
    site has a sign-in recipe; ``None`` when no renewal was tried (or it was refused)."""
    if contract.site is None:
        return None
    site = normalize_site(contract.site)
    action = "write" if "write" in contract.allowed_actions else "read"
    if keeper.restart_policy(action) != "relogin" or not keeper.has_sign_in_recipe(site):
        return None
    try:
        return await keeper.renew_login(conversation_of(contract), site)
    except (BrowserError, PolicyRefusal):
        return None  # a refused renewal or a dead browser: the person's path


async def renewed_for_job(keeper: SessionKeeper[PageT], contract: JobContract) -> bool:
    """Whether :func:`renewal_for_job` signed the site in again."""
    renewal = await renewal_for_job(keeper, contract)
    return renewal is not None and renewal.renewed


async def signed_out(keeper: SessionKeeper[PageT], contract: JobContract, why: str) -> Stop | None:
    """The site signed the job out: tell the keeper (a loss for everyone); then renew it
    when the policy allows (``None``: renewed, retry the step), else the pause to raise,
    which waits for a new login to the site (``login_site``)."""
    if contract.site is None:
        return Stop("awaiting_human", f"signed out: {why}")
    site = normalize_site(contract.site)
    await keeper.report_signed_out(
        site, reported_by=conversation_of(contract), reason=f"job {contract.job_id}: {why}"
    )
    renewal = await renewal_for_job(keeper, contract)
    if renewal is not None and renewal.renewed:
        return None
    tried = (
        f"; the keeper's renewal ended {renewal.outcome} after {renewal.attempts} attempt(s)"
        if renewal is not None
        else ""
    )
    return Stop(
        "awaiting_human",
        f"{site} signed the job out ({why}){tried}; a human must sign in again, then resume",
        login_site=site,
    )


def expired(until: object, now: datetime) -> bool:
    """Whether a stored ``expires_at`` (ISO text, or absent) has passed."""
    return isinstance(until, str) and datetime.fromisoformat(until) <= now


class Pauses(Generic[PageT]):
    """Hands paused jobs back to the loop, cancels them, or stops them once expired."""

    def __init__(self, keeper: SessionKeeper[PageT], store: Store, settings: LoopSettings) -> None:
        self.keeper = keeper
        self.store = store
        self.settings = settings
        self.clock = keeper.clock

    async def last_pause(self, job_id: str) -> Event | None:
        """The job's newest ``human_pause`` event."""
        events = await self.store.events(
            job_id=job_id, kind="human_pause", limit=1, newest_first=True
        )
        return events[0] if events else None

    async def check_login_recorded(self, job_id: str) -> None:
        """Raise :class:`LoginStillMissing` while a login pause has no login recorded after it."""
        job = await self.store.load_job(job_id)
        if job.checkpoint.state != "awaiting_human":
            return  # resume() says why, under the lease
        pause = await self.last_pause(job_id)
        if pause is None:
            return
        site = pause.data.get("login_site")
        if not isinstance(site, str):
            return
        if expired(pause.data.get("expires_at"), self.clock.now()):
            return  # an expired pause is stopped by resume(), login or not
        record = next((r for r in self.keeper.logins() if r.site == site), None)
        if record is None or record.recorded_at < pause.at:
            raise LoginStillMissing(
                f"job {job_id!r} waits for a login to {site}: none was recorded since the "
                "pause; sign in, record_login(), then resume"
            )

    async def resume(
        self, job_id: str, *, decided_by: str, cancel: bool, note: str | None
    ) -> Checkpoint:
        """See :meth:`JobLoop.resume`."""
        if not cancel:
            # Before anything is written (even the lease): a job paused for a login
            # stays paused, untouched, until a login to the site is recorded after it.
            await self.check_login_recorded(job_id)
        async with held_lease(self.store, job_id, self.settings) as lease:
            job = await self.store.load_job(job_id)
            cp = job.checkpoint
            if cp.state != "awaiting_human":
                raise InvalidArgument(f"job {job_id!r} is {cp.state}, not awaiting_human")
            pause = await self.last_pause(job_id)
            now = self.clock.now()
            waited = (now - pause.at).total_seconds() if pause is not None else None
            data = {"decided_by": decided_by, "note": note, "human_wait_s": waited}
            if waited is not None:
                self.settings.instruments.record("session_keeper.job.human_pause.age", waited)

            if cancel:
                return await self.store.transition(
                    lease,
                    cp.checkpoint_revision,
                    "stopped",
                    pause_reason=f"cancelled by {decided_by}",
                    event=Event(kind="human_cancelled", at=now, job_id=job_id, data=data),
                )
            if pause is not None and expired(pause.data.get("expires_at"), now):
                return await self.store.transition(
                    lease,
                    cp.checkpoint_revision,
                    "stopped",
                    pause_reason="the human pause expired before anyone resumed it",
                    event=Event(kind="human_pause_expired", at=now, job_id=job_id, data=data),
                )
            contract = job.contract
            if contract.site is not None:
                conversation = conversation_of(contract)
                facts = await self.keeper.ensure(conversation)
                decision = self.keeper.permits(conversation, contract.site, "read")
                if decision.outcome != "act":
                    reason = (
                        f"still no usable login to {contract.site} in {facts.browser_id}: "
                        f"{decision.reason}"
                    )
                    return await self.store.transition(
                        lease,
                        cp.checkpoint_revision,
                        "awaiting_human",
                        pause_reason=reason,
                        event=Event(
                            kind="human_resume_refused",
                            at=now,
                            job_id=job_id,
                            generation=facts.generation,
                            data=data,
                        ),
                    )
                if decision.needs_revalidation:
                    # The person who resumes vouches for the account they checked.
                    self.keeper.confirm_login(conversation, contract.site)
            return await self.store.transition(
                lease,
                cp.checkpoint_revision,
                "ready",
                event=Event(kind="human_resumed", at=now, job_id=job_id, data=data),
            )

    async def expire(self) -> list[str]:
        """See :meth:`JobLoop.expire_pauses`."""
        found: list[str] = []
        now = self.clock.now()
        for job in await self.store.jobs(states=["awaiting_human"]):
            pause = await self.last_pause(job.job_id)
            until = pause.data.get("expires_at") if pause is not None else None
            if not isinstance(until, str) or not expired(until, now):
                continue
            try:
                lease = await self.store.claim(
                    job.job_id, self.settings.worker_id, self.settings.lease_ttl
                )
            except LeaseHeldError:
                continue  # another worker has it: a later sweep
            try:
                current = await self.store.load_job(job.job_id)
                if current.checkpoint.state == "awaiting_human":
                    await self.store.transition(
                        lease,
                        current.checkpoint.checkpoint_revision,
                        "stopped",
                        pause_reason=f"the human pause expired at {until}; resume from "
                        f"{current.checkpoint.next_cursor}",
                        event=Event(kind="human_pause_expired", at=now, job_id=job.job_id),
                    )
                    found.append(job.job_id)
            finally:
                await release_quietly(self.store, lease)
        return found
