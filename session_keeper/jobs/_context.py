"""What a job step sees and returns: one bounded interaction with one page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Generic, Literal, Protocol, TypeVar

import attrs

from session_keeper._browser.backend import PageT
from session_keeper.errors import InvalidArgument
from session_keeper.stores._records import Checkpoint, Lease, ResultRecord


@attrs.frozen(kw_only=True)
class Accepted:
    """What a step observed: records, where to go next, and which page it was."""

    records: tuple[ResultRecord, ...]
    #: The cursor after this page; ``None`` when the job is complete.
    next_cursor: str | None
    #: What the page said it was (checked against the loop's expectation).
    page_identity: str


@attrs.frozen(kw_only=True)
class Readback:
    """What the destination says about an external write, read back after the fact.

    ``applied``: it happened (``outcome`` says what). ``absent``: it definitely did
    not. ``unknown``: the destination cannot tell — a person must decide.
    """

    status: Literal["applied", "absent", "unknown"]
    outcome: Mapping[str, object] = attrs.field(factory=dict)


#: The page type a writer hands to ``submit``/``readback`` (covariant, as a producer).
PageCo = TypeVar("PageCo", covariant=True)


class StepWrites(Protocol[PageCo]):
    """What :meth:`StepContext.write` hands an external write to (the loop's writer)."""

    async def write(
        self,
        conversation: str,
        lease: Lease,
        key: str,
        intent: Mapping[str, object],
        submit: Callable[[PageCo], Awaitable[Mapping[str, object]]],
        readback: Callable[[PageCo], Awaitable[Readback]],
        *,
        idempotent: bool,
        url: str | None,
    ) -> Mapping[str, object]: ...


@attrs.define
class StepContext(Generic[PageT]):
    """Handed to a step: the page, the checkpoint's cursor, and the ways to answer."""

    job_id: str
    conversation: str
    cursor: str | None
    attempt: int
    checkpoint: Checkpoint
    #: The raw page (``keeper.unguarded_page``): a step is trusted application code. Do
    #: not hand it to LLM-driven code; give that ``keeper.tab(conversation)``.
    page: PageT
    generation: int
    _writes: StepWrites[PageT]
    _lease: Lease

    def accept(
        self,
        records: Sequence[ResultRecord | Mapping[str, object]],
        next_cursor: str | None,
        *,
        page_identity: str,
    ) -> Accepted:
        """Answer with the page's records; a mapping needs a ``source_record_id`` key."""
        converted: list[ResultRecord] = []
        for r in records:
            if isinstance(r, ResultRecord):
                converted.append(r)
                continue
            data = dict(r)
            rid = data.pop("source_record_id", None)
            if not isinstance(rid, str) or not rid:
                raise InvalidArgument("every record needs a non-empty source_record_id")
            converted.append(ResultRecord(source_record_id=rid, data=data))
        return Accepted(
            records=tuple(converted), next_cursor=next_cursor, page_identity=page_identity
        )

    async def write(
        self,
        key: str,
        intent: Mapping[str, object],
        submit: Callable[[PageT], Awaitable[Mapping[str, object]]],
        readback: Callable[[PageT], Awaitable[Readback]],
        *,
        url: str | None = None,
        idempotent: bool = False,
    ) -> Mapping[str, object]:
        """Do an external write at most once, as far as the destination can tell.

        The intent is recorded before ``submit`` runs and the outcome after. An
        intent found from an earlier attempt is reconciled by ``readback`` — never
        resubmitted blindly: only a definite ``absent`` from a destination that
        honours the key (``idempotent=True``) allows one resubmission. When the
        outcome cannot be established, :class:`WriteOutcomeUnknown` is raised and
        the loop hands the job to a person.

        Which page each callable sees: ``submit(page)`` and ``readback(page)`` get
        the job's page, and **each call starts on ``url``** (default: the URL the
        page shows when ``write`` is called): the loop navigates there before every
        call, so a readback that navigated away never leaves ``submit`` on the wrong
        page. Raises :class:`InvalidArgument` when there is no ``url`` to start from;
        a Playwright or builtin timeout in ``submit`` counts as an unknown outcome
        (read back, never resubmitted blindly).
        """
        return await self._writes.write(
            self.conversation,
            self._lease,
            key,
            intent,
            submit,
            readback,
            idempotent=idempotent,
            url=url,
        )


#: A step: one bounded interaction with the page at the checkpoint's cursor.
Step = Callable[[StepContext[PageT]], Awaitable[Accepted]]
