"""What the console shows, as plain rows of text: read through public APIs only.

The keeper in this process is read live (its public read-only methods); other keepers
and every job are read from the Store (their saved documents, jobs and events). Rows
carry cookie names and fingerprint prefixes only, URLs without query or fragment, and
event data through the same redaction as logs — never a cookie value or a key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from session_keeper._keeper.facade.keeper import SessionKeeper
from session_keeper._keeper.saving.sealed_rows import saved_document
from session_keeper._util.redact import redact_text, redact_url
from session_keeper.jobs import Job
from session_keeper.jobs._origins import conversation_of
from session_keeper.stores import Store

__all__ = ["Row", "gather", "paused_jobs"]

Row = dict[str, Any]


def when(value: datetime | str | None) -> str:
    """An instant as ``YYYY-MM-DD HH:MM:SS`` UTC (empty for ``None``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        try:
            instant = datetime.fromisoformat(value)
        except ValueError:
            return value
    else:
        instant = value
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def age(delta: timedelta | None) -> str:
    """A duration as ``1h 2m``, ``3m 4s`` or ``5s``."""
    if delta is None:
        return ""
    s = max(0, int(delta.total_seconds()))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    if s >= 60:
        return f"{s // 60}m {s % 60}s"
    return f"{s}s"


def _cookies(cookies: Any) -> str:
    out = []
    for c in cookies or ():
        name = c.get("name") if isinstance(c, Mapping) else getattr(c, "name", None)
        fp = c.get("fingerprint") if isinstance(c, Mapping) else getattr(c, "fingerprint", None)
        out.append(f"{name} fp:{str(fp)[:12]}")
    return ", ".join(out)


def _items(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = doc.get(key)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


async def _other_docs(
    keeper: SessionKeeper[Any] | None, store: Store | None
) -> list[tuple[str, Mapping[str, Any]]]:
    if store is None:
        return []
    mine = keeper.keeper_id if keeper is not None else None
    docs: list[tuple[str, Mapping[str, Any]]] = []
    for kid in await store.keeper_ids():
        if kid == mine:
            continue
        doc = await saved_document(store, kid)
        if doc is not None:
            docs.append((kid, doc))
    return docs


async def gather(
    keeper: SessionKeeper[Any] | None, store: Store | None, *, events: int = 50
) -> dict[str, list[Row]]:
    """Every section of the console as rows of text."""
    now = datetime.now(UTC)
    out: dict[str, list[Row]] = {
        k: []
        for k in ("browsers", "conversations", "logins", "grants", "borrows", "jobs", "events")
    }
    if keeper is not None and not keeper.closed:
        kid = keeper.keeper_id
        takeovers = keeper.takeovers()
        for g in keeper.generations():
            out["browsers"].append(
                {
                    "keeper": kid,
                    "browser": f"browser-{g.generation}",
                    "state": "alive"
                    if g.generation == keeper.generation and keeper.alive
                    else (g.cause or "ended"),
                    "started": when(g.started_at),
                    "ended": when(g.ended_at),
                    "where": "this process",
                }
            )
        for t in keeper.tabs():
            out["conversations"].append(
                {
                    "keeper": kid,
                    "conversation": t.conversation,
                    "url": redact_url(t.url) or "",
                    "verified_url": redact_url(t.last_verified_url) or "",
                    "age": age(now - t.verified_at),
                    "idle": age(t.idle),
                    "generation": t.generation,
                    "state": "open" if t.open else "closed",
                    "taken_over_until": when(takeovers.get(t.conversation)),
                }
            )
        for rec in keeper.logins():
            out["logins"].append(
                {
                    "keeper": kid,
                    "site": rec.site,
                    "owner": rec.owner,
                    "account": rec.account or "",
                    "when": when(rec.recorded_at),
                    "generation": rec.generation,
                    "state": "needs re-validation" if rec.needs_revalidation else "live",
                    "cookies": _cookies(rec.cookies),
                }
            )
        for lost in keeper.lost_logins():
            out["logins"].append(
                {
                    "keeper": kid,
                    "site": lost.name,
                    "owner": lost.owner,
                    "account": "",
                    "when": when(lost.when),
                    "generation": lost.generation,
                    "state": f"lost ({lost.cause})",
                    "cookies": "",
                }
            )
        for gr in keeper.grants():
            out["grants"].append(
                {
                    "keeper": kid,
                    "conversation": gr.conversation,
                    "site": gr.site,
                    "actions": ",".join(sorted(gr.actions)),
                    "uses": "unlimited" if gr.uses is None else gr.uses,
                    "expires": when(gr.expires_at) or "never",
                    "approved_by": gr.approved_by or "",
                }
            )
        for r in keeper.borrow_requests(status=None):
            out["borrows"].append(
                {
                    "keeper": kid,
                    "id": r.id,
                    "conversation": r.conversation,
                    "site": r.site,
                    "action": r.action,
                    "reason": r.reason or "",
                    "requested": when(r.requested_at),
                    "expires": when(r.expires_at),
                    "status": r.status,
                    "decided_by": r.decided_by or "",
                    "answerable": r.status == "pending",
                }
            )
    for kid, doc in await _other_docs(keeper, store):
        sealed = doc.get("account_sealing") is not None
        current = doc.get("generation")
        for dg in _items(doc, "generations"):
            out["browsers"].append(
                {
                    "keeper": kid,
                    "browser": f"browser-{dg.get('generation')}",
                    "state": "current (per store)"
                    if dg.get("generation") == current and dg.get("ended_at") is None
                    else (dg.get("cause") or "ended"),
                    "started": when(dg.get("started_at")),
                    "ended": when(dg.get("ended_at")),
                    "where": "another process (store)",
                }
            )
        for dt in _items(doc, "tabs"):
            verified = dt.get("verified_at")
            out["conversations"].append(
                {
                    "keeper": kid,
                    "conversation": dt.get("conversation"),
                    "url": "",
                    "verified_url": redact_url(dt.get("last_url")) or "",
                    "age": age(now - datetime.fromisoformat(verified))
                    if isinstance(verified, str)
                    else "",
                    "idle": "",
                    "generation": dt.get("generation"),
                    "state": "per store",
                    "taken_over_until": "",
                }
            )
        for drec in _items(doc, "logins"):
            out["logins"].append(
                {
                    "keeper": kid,
                    "site": drec.get("site"),
                    "owner": drec.get("owner"),
                    "account": "(sealed)"
                    if sealed and drec.get("account")
                    else drec.get("account"),
                    "when": when(drec.get("recorded_at")),
                    "generation": drec.get("generation"),
                    "state": "needs re-validation" if drec.get("needs_revalidation") else "live",
                    "cookies": _cookies(drec.get("cookies")),
                }
            )
        for dgr in _items(doc, "grants"):
            out["grants"].append(
                {
                    "keeper": kid,
                    "conversation": dgr.get("conversation"),
                    "site": dgr.get("site"),
                    "actions": ",".join(str(a) for a in dgr.get("actions") or ()),
                    "uses": "unlimited" if dgr.get("uses") is None else dgr.get("uses"),
                    "expires": when(dgr.get("expires_at")) or "never",
                    "approved_by": dgr.get("approved_by") or "",
                }
            )
        for dr in _items(doc, "borrow_requests"):
            out["borrows"].append(
                {
                    "keeper": kid,
                    "id": dr.get("id"),
                    "conversation": dr.get("conversation"),
                    "site": dr.get("site"),
                    "action": dr.get("action"),
                    "reason": dr.get("reason") or "",
                    "requested": when(dr.get("requested_at")),
                    "expires": when(dr.get("expires_at")),
                    "status": dr.get("status"),
                    "decided_by": dr.get("decided_by") or "",
                    # Answered by the process that owns that keeper, not from here.
                    "answerable": False,
                }
            )
    if store is not None:
        out["jobs"] = [await job_row(store, job) for job in await store.jobs()]
        for e in await store.events(limit=events, newest_first=True):
            data = json.dumps(dict(e.data), default=str, sort_keys=True)
            out["events"].append(
                {
                    "id": e.id,
                    "at": when(e.at),
                    "kind": e.kind,
                    "job": e.job_id or "",
                    "step": e.step or "",
                    "generation": "" if e.generation is None else e.generation,
                    "data": redact_text(data, limit=240) if e.data else "",
                }
            )
    return out


async def job_row(store: Store, job: Job) -> Row:
    """One job, with its human pause (reason, target, allowed next action, expiry)."""
    cp = job.checkpoint
    row: Row = {
        "job_id": job.job_id,
        "state": cp.state,
        "conversation": conversation_of(job.contract),
        "site": job.contract.site or "",
        "next_cursor": cp.next_cursor or "",
        "revision": cp.checkpoint_revision,
        "updated": when(job.updated_at),
        "reason": redact_text(cp.pause_reason) if cp.pause_reason else "",
        "target_identity": "",
        "allowed_next_action": "",
        "pause_expires": "",
    }
    if cp.state == "awaiting_human":
        pauses = await store.events(
            job_id=job.job_id, kind="human_pause", limit=1, newest_first=True
        )
        if pauses:
            d = pauses[0].data
            row["target_identity"] = str(d.get("target_identity") or "")
            row["allowed_next_action"] = str(d.get("allowed_next_action") or "")
            expires = d.get("expires_at")
            row["pause_expires"] = when(expires) if isinstance(expires, str) else ""
    return row


async def paused_jobs(store: Store, conversation: str) -> list[Job]:
    """The jobs paused for a person that act as ``conversation``."""
    return [
        job
        for job in await store.jobs(states=["awaiting_human"])
        if conversation_of(job.contract) == conversation
    ]
