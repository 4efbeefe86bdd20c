"""What a step's answer must satisfy before anything of it is committed."""

from __future__ import annotations

from collections.abc import Callable

from session_keeper.errors import InvalidArgument, PageChanged, SignedOut
from session_keeper.jobs._context import Accepted
from session_keeper.jobs._origins import is_login_page, origin_allowed
from session_keeper.stores._records import Job


def validate(
    job: Job,
    accepted: Accepted,
    current_url: Callable[[], str | None],
    expect_identity: Callable[[str | None], str] | None,
) -> None:
    """Check page identity, sign-in page, origin, record ids and required fields.

    Raises :class:`InvalidArgument` when the step did not answer with ``ctx.accept``,
    :class:`SignedOut` on the sign-in page, and :class:`PageChanged` otherwise.
    """
    if not isinstance(accepted, Accepted):
        raise InvalidArgument("a step must return ctx.accept(...)")
    if is_login_page(current_url(), job.contract.login_url):
        raise SignedOut("the step ended on the sign-in page")
    cursor = job.checkpoint.next_cursor
    if expect_identity is not None:
        expected = expect_identity(cursor)
        if accepted.page_identity != expected:
            raise PageChanged(f"expected page {expected!r}, observed {accepted.page_identity!r}")
    url = current_url()
    if url is not None and not origin_allowed(url, job.contract.allowed_origins):
        raise PageChanged(f"page left the contract's origins: {url}")
    ids = [r.source_record_id for r in accepted.records]
    if len(set(ids)) != len(ids):
        raise PageChanged("the page listed a record id twice")
    for r in accepted.records:
        missing = [f for f in job.contract.required_fields if r.data.get(f) in (None, "")]
        if missing:
            raise PageChanged(f"record {r.source_record_id} lacks {', '.join(missing)}")
