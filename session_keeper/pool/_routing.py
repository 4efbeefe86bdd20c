"""Routing: which browser profile serves a conversation (a small, typed policy seam).

A :class:`RoutingPolicy` answers once per conversation; the pool remembers the answer
for the conversation's life, so a conversation never moves between profiles (its
tab, its logins and its facts live in one profile's keeper).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from session_keeper._model.cookies import normalize_site
from session_keeper._util.validate import check_mapping
from session_keeper.errors import InvalidArgument, InvalidArgumentType

__all__ = ["PinnedRouting", "RoutingPolicy", "SiteRouting", "SpreadRouting"]


@runtime_checkable
class RoutingPolicy(Protocol):
    """Chooses the profile for a conversation the pool has not routed yet."""

    def route(
        self,
        conversation: str,
        *,
        site: str | None,
        account: str | None,
        profiles: Sequence[str],
    ) -> str | None:
        """The profile (one of ``profiles``) for ``conversation``, or ``None`` for no opinion.

        ``site`` and ``account`` are what the caller passed to ``ensure()`` (a job
        passes its contract's site and account alias).
        """
        ...


def _check_targets(mapping: Mapping[str, str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, profile in check_mapping(mapping, what).items():
        if not isinstance(key, str) or not isinstance(profile, str):
            raise InvalidArgumentType(f"{what} maps str to a profile name (str)")
        if not key or not profile:
            raise InvalidArgument(f"{what} has an empty name")
        out[key] = profile
    return out


def _check_fallback(fallback: RoutingPolicy | None) -> RoutingPolicy | None:
    """The policy a routing asks where it has no answer (``None``: none)."""
    if fallback is not None and not isinstance(fallback, RoutingPolicy):
        raise InvalidArgumentType("fallback must implement RoutingPolicy")
    return fallback


class PinnedRouting:
    """Named conversations go to named profiles; others ask ``fallback`` (if any)."""

    def __init__(self, pins: Mapping[str, str], *, fallback: RoutingPolicy | None = None) -> None:
        self._pins = _check_targets(pins, "pins")
        self._fallback = _check_fallback(fallback)

    def route(
        self, conversation: str, *, site: str | None, account: str | None, profiles: Sequence[str]
    ) -> str | None:
        """See :meth:`RoutingPolicy.route`."""
        pinned = self._pins.get(conversation)
        if pinned is not None or self._fallback is None:
            return pinned
        return self._fallback.route(conversation, site=site, account=account, profiles=profiles)


class SiteRouting:
    """By account first (one account per profile), then by site; else ``fallback``."""

    def __init__(
        self,
        sites: Mapping[str, str] | None = None,
        *,
        accounts: Mapping[str, str] | None = None,
        fallback: RoutingPolicy | None = None,
    ) -> None:
        self._sites = {
            normalize_site(s): p for s, p in _check_targets(sites or {}, "sites").items()
        }
        self._accounts = _check_targets(accounts or {}, "accounts")
        self._fallback = _check_fallback(fallback)

    def route(
        self, conversation: str, *, site: str | None, account: str | None, profiles: Sequence[str]
    ) -> str | None:
        """See :meth:`RoutingPolicy.route`."""
        if account is not None and account in self._accounts:
            return self._accounts[account]
        if site is not None:
            chosen = self._sites.get(normalize_site(site))
            if chosen is not None:
                return chosen
        if self._fallback is None:
            return None
        return self._fallback.route(conversation, site=site, account=account, profiles=profiles)


class SpreadRouting:
    """Spreads conversations over every profile by a stable hash of their name.

    Stable across processes and restarts (SHA-256, not Python's salted ``hash``), so
    a conversation comes back to the profile that holds its tab and its facts.
    """

    def route(
        self, conversation: str, *, site: str | None, account: str | None, profiles: Sequence[str]
    ) -> str | None:
        """See :meth:`RoutingPolicy.route`."""
        digest = hashlib.sha256(conversation.encode("utf-8")).digest()
        return profiles[int.from_bytes(digest[:8], "big") % len(profiles)]
