"""Grants: which conversation may use which site's login, for what, until when."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from itertools import count

import attrs

from session_keeper._model.changes import Changes
from session_keeper._model.cookies import normalize_site
from session_keeper._util.validate import check_collection
from session_keeper.errors import InvalidArgument, InvalidArgumentType

#: Conversation ids the keeper keeps for its own pages.
RESERVED_PREFIX = "session-keeper:"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

#: The longest name (conversation id, site, action, ...) accepted: ids travel in URL
#: paths, log fields and store keys, where 10 kB of id is an attack, not a name.
MAX_NAME_CHARS = 1024
#: Kinds checked here that are not names and may be longer (a URL with a long query).
_UNBOUNDED = frozenset({"url"})

#: The actions every keeper knows; a keeper may be configured with more.
DEFAULT_ACTIONS: frozenset[str] = frozenset({"read", "write"})


#: Names already found valid, per kind: every turn checks the same few names again.
#: Bounded (cleared when full) so a stream of distinct ids cannot grow it without end.
_VALID: set[tuple[str, str]] = set()
_VALID_MAX = 4096


def check_name(value: object, what: str) -> str:
    """Validate a name (conversation id, site, action, ...): a non-empty ``str``.

    Control characters are refused: a NUL in one conversation id would make every
    later save of the keeper's state fail on PostgreSQL, for every conversation. So
    are names longer than :data:`MAX_NAME_CHARS` (URLs excepted).
    """
    # Exactly ``str``: a subclass could compare equal yet behave differently.
    if type(value) is str and (value, what) in _VALID:
        return value
    if not isinstance(value, str):
        raise InvalidArgumentType(f"{what} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(f"{what} must not be empty")
    if _CONTROL.search(value):
        raise InvalidArgument(f"{what} must not contain control characters")
    if len(value) > MAX_NAME_CHARS and what not in _UNBOUNDED:
        raise InvalidArgument(f"{what} must be at most {MAX_NAME_CHARS} characters")
    if what == "conversation" and value.startswith(RESERVED_PREFIX):
        # The keeper's own pages (login probes) use these; a user's may not pose as them.
        raise InvalidArgument(f"conversation ids starting with {RESERVED_PREFIX!r} are reserved")
    if type(value) is str:
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID.add((value, what))
    return value


def _conversation(value: object) -> str:
    return check_name(value, "conversation")


def _site(value: object) -> str:
    return normalize_site(check_name(value, "site"))


def _actions(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, str):
        raise InvalidArgumentType("actions must be a collection of str, not a single str")
    items = check_collection(value, "actions")
    for a in items:
        check_name(a, "action")
        meant = _slip_of(a)
        if meant is not None:
            raise InvalidArgument(
                f"{a!r} is not an action: did you mean {meant!r}? "
                f"(the actions every keeper knows are {', '.join(sorted(DEFAULT_ACTIONS))})"
            )
    actions = frozenset(items)
    if not actions:
        raise InvalidArgument("a grant needs at least one action")
    return actions


def _slip_of(action: str) -> str | None:
    """The default action ``action`` is a typing slip of (``raed``, ``Write``, ``reads``).

    A keeper may know more actions than read and write (``SessionKeeper(actions=...)``),
    so a grant cannot refuse every other name; but one a single slip away from a
    default action (another case, one letter added, dropped, changed, or two swapped)
    is a mistake, refused when the grant is made rather than when a keeper sees it.
    """
    for known in sorted(DEFAULT_ACTIONS):
        if action != known and _one_slip(action.lower(), known):
            return known
    return None


def _one_slip(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` are equal or one edit apart (an adjacent swap counts one)."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )  # fmt: skip
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


def _check_expiry(_: object, __: attrs.Attribute[datetime | None], value: datetime | None) -> None:
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise InvalidArgument("expires_at must be a timezone-aware datetime")


def _utc(value: object) -> object:
    """An aware expiry as the same instant in UTC; anything else is left to the validator.

    A grant's identity must not depend on the zone it was written in: two aware
    datetimes in different zones never compare equal inside a repeated (DST fold) hour,
    so a saved copy of a grant would not be recognised as the configured one.
    """
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    return value


def _check_approver(_: object, __: attrs.Attribute[str | None], value: str | None) -> None:
    # Checked here, not at save: a non-str approver would poison the saved state.
    if value is not None:
        check_name(value, "approved_by")


def _check_uses(_: object, __: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidArgument("uses must be a positive int or None")


@attrs.frozen
class Grant:
    """Permission for ``conversation`` to use ``site``'s login for ``actions``.

    Cookies are shared inside the browser; permission is not. A grant stops granting
    once ``expires_at`` has passed or its ``uses`` are spent.

    Checked when made: an action one typing slip from ``read`` or ``write`` (``raed``,
    ``Write``) raises :class:`~session_keeper.errors.InvalidArgument` naming the one
    meant; other names are left to the keeper, which may know more (``actions=``).
    """

    conversation: str = attrs.field(converter=_conversation)
    site: str = attrs.field(converter=_site)
    actions: frozenset[str] = attrs.field(default=DEFAULT_ACTIONS, converter=_actions, kw_only=True)
    #: Normalised to UTC (the same instant), so equality never depends on the zone.
    expires_at: datetime | None = attrs.field(
        default=None, converter=_utc, validator=_check_expiry, kw_only=True
    )
    #: How many ``act`` decisions it allows; ``None`` for no limit.
    uses: int | None = attrs.field(default=None, validator=_check_uses, kw_only=True)
    #: Who approved it, for a one-time borrow a human approved.
    approved_by: str | None = attrs.field(default=None, validator=_check_approver, kw_only=True)


_grant_ids = count(1)


@attrs.define
class GrantState:
    """A grant in the keeper's book, with what is left of it."""

    grant: Grant
    uses_left: int | None
    id: int = attrs.field(factory=lambda: next(_grant_ids))

    def live(self, now: datetime) -> bool:
        """Whether it still grants anything at ``now``."""
        g = self.grant
        if g.expires_at is not None and now >= g.expires_at:
            return False
        return self.uses_left is None or self.uses_left > 0

    def covers(self, conversation: str, site: str, action: str, now: datetime) -> bool:
        """Whether it lets ``conversation`` do ``action`` on ``site`` at ``now``."""
        g = self.grant
        return (
            g.conversation == conversation
            and g.site == site
            and action in g.actions
            and self.live(now)
        )


class GrantBook:
    """The keeper's grants and their remaining uses, indexed by conversation and site.

    The Guard asks on every request, so a lookup reads only the grants of that
    conversation on that site: its cost does not grow with unrelated grants.
    """

    def __init__(self, known_actions: frozenset[str]) -> None:
        self._known_actions = known_actions
        # Every grant by id, in book order (the order saves and ``states()`` list them).
        self._states: dict[int, GrantState] = {}
        # (conversation, site) -> its grants in book order; never an empty list.
        self._by_key: dict[tuple[str, str], list[GrantState]] = {}
        # site -> conversations holding any grant on it (for ``holders``).
        self._by_site: dict[str, set[str]] = {}
        #: Called (no arguments) after grants were added or removed.
        self.changed_hooks: list[Callable[[], None]] = []
        #: The ids of grants added, spent or removed since the last save took them.
        self.changes: Changes[int] = Changes()

    def _changed(self) -> None:
        for hook in list(self.changed_hooks):
            hook()

    def _index(self, states: Iterable[GrantState]) -> None:
        """Replace the book with ``states`` (in this order)."""
        self._states = {}
        self._by_key = {}
        self._by_site = {}
        for s in states:
            self._insert(s)

    def _insert(self, state: GrantState) -> None:
        g = state.grant
        self._states[state.id] = state
        self._by_key.setdefault((g.conversation, g.site), []).append(state)
        self._by_site.setdefault(g.site, set()).add(g.conversation)

    def add(self, grant: Grant) -> GrantState:
        """Add a grant; an action the keeper does not know is refused."""
        if not isinstance(grant, Grant):
            raise InvalidArgumentType(f"expected a Grant, not {type(grant).__name__}")
        unknown = grant.actions - self._known_actions
        if unknown:
            known = sorted(self._known_actions)
            raise InvalidArgument(f"grant for unknown action(s) {sorted(unknown)}; known: {known}")
        state = GrantState(grant=grant, uses_left=grant.uses)
        self._insert(state)
        self.changes.add(state.id)
        self._changed()
        return state

    def merge_saved(self, saved: Iterable[tuple[Grant, int | None]]) -> None:
        """Take in the grants a previous process saved, with their remaining uses.

        A saved grant equal to a configured one is that grant (its spent uses stay
        spent), not a second copy. Everything is checked before anything changes.
        Linear in the grants: twins are found by hash, not by a scan.
        """
        states = list(self._states.values())
        # Equal grants configured twice are two states: each saved copy takes the
        # first one not yet matched, in book order.
        unmatched: dict[Grant, deque[int]] = {}
        for index, s in enumerate(states):
            unmatched.setdefault(s.grant, deque()).append(index)
        for grant, uses_left in saved:
            unknown = grant.actions - self._known_actions
            if unknown:
                raise InvalidArgument(
                    f"a saved grant for {grant.site} names unknown action(s) {sorted(unknown)}"
                )
            if uses_left is not None and (grant.uses is None or not 0 <= uses_left <= grant.uses):
                raise InvalidArgument(f"a saved grant for {grant.site} has impossible uses left")
            twins = unmatched.get(grant)
            if twins:
                index = twins.popleft()
                states[index] = GrantState(grant=grant, uses_left=uses_left, id=states[index].id)
            else:
                states.append(GrantState(grant=grant, uses_left=uses_left))
        self._index(states)
        self.changes.update(s.id for s in states)
        self._changed()

    def revoke(self, conversation: str, site: str) -> tuple[Grant, ...]:
        """Remove every grant of ``conversation`` on ``site``; return them."""
        site = normalize_site(site)
        gone = self._by_key.pop((conversation, site), [])
        if not gone:
            return ()
        for s in gone:
            del self._states[s.id]
            self.changes.add(s.id)
        holders = self._by_site[site]
        holders.discard(conversation)
        if not holders:
            del self._by_site[site]
        self._changed()
        return tuple(s.grant for s in gone)

    def spend(self, state: GrantState) -> None:
        """One use of a counted grant is spent (its row changes)."""
        assert state.uses_left is not None and state.uses_left > 0
        state.uses_left -= 1
        self.changes.add(state.id)

    def get(self, grant_id: int) -> GrantState | None:
        """The grant with this id, while it is in the book."""
        return self._states.get(grant_id)

    def _of(self, conversation: str, site: str) -> list[GrantState]:
        return self._by_key.get((conversation, site), [])

    def standing(self, conversation: str, site: str, action: str) -> bool:
        """Whether an unlimited grant that never expires lets ``conversation`` do
        ``action`` on ``site``: an answer that only a grant change can change."""
        return any(
            action in s.grant.actions and s.uses_left is None and s.grant.expires_at is None
            for s in self._of(conversation, site)
        )

    def find(self, conversation: str, site: str, action: str, now: datetime) -> GrantState | None:
        """The grant an act spends: unlimited before counted ones, soonest expiry first."""
        matches = [
            s for s in self._of(conversation, site) if s.covers(conversation, site, action, now)
        ]
        if not matches:
            return None

        def order(s: GrantState) -> tuple[int, float]:
            expiry = s.grant.expires_at.timestamp() if s.grant.expires_at else float("inf")
            return (0 if s.uses_left is None else 1, expiry)

        return min(matches, key=order)

    def for_conversation(self, conversation: str, site: str, now: datetime) -> list[GrantState]:
        """Live grants of ``conversation`` on ``site``, whatever their actions."""
        return [s for s in self._of(conversation, site) if s.live(now)]

    def holders(self, site: str, now: datetime) -> set[str]:
        """Conversations holding a live grant on ``site``."""
        return {
            conversation
            for conversation in self._by_site.get(site, ())
            if any(s.live(now) for s in self._of(conversation, site))
        }

    def expire(self, now: datetime) -> tuple[Grant, ...]:
        """Drop grants that no longer grant anything; return them."""
        dead = [s for s in self._states.values() if not s.live(now)]
        if dead:
            gone = {s.id for s in dead}
            self._index(s for s in self._states.values() if s.id not in gone)
            self.changes.update(gone)
        return tuple(s.grant for s in dead)

    def states(self) -> tuple[GrantState, ...]:
        """Every grant in the book."""
        return tuple(self._states.values())

    def check_action(self, action: object) -> str:
        """Validate an action name against the keeper's known actions."""
        check_name(action, "action")
        assert isinstance(action, str)
        if action not in self._known_actions:
            raise InvalidArgument(
                f"unknown action {action!r}; known: {sorted(self._known_actions)}"
            )
        return action
