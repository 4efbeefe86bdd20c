"""Many profiles, a bound on open browsers: a pool of keepers, one per profile, leased in the Store.

A conversation is routed to a profile by a :class:`RoutingPolicy` (pinned, by account or
site, or spread by hash); at most ``max_open`` browsers are open at once, the least
recently used closed as an idle sweep would close it. A profile is leased across
processes and machines, so two workers never open one profile.
"""

from session_keeper.pool._pool import KeeperPool, PoolStats
from session_keeper.pool._routing import PinnedRouting, RoutingPolicy, SiteRouting, SpreadRouting

__all__ = [
    "KeeperPool",
    "PinnedRouting",
    "PoolStats",
    "RoutingPolicy",
    "SiteRouting",
    "SpreadRouting",
]
