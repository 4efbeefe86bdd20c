"""How a SessionKeeper is put together: its settings checked, its parts built and wired.

The facade holds the parts; this is the one place that knows which part needs which.
Every setting is checked before any part exists, so a bad one changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic

import attrs

from session_keeper._browser.backend import BrowserBackend, PageT
from session_keeper._browser.rebind import KeeperNamedBackend
from session_keeper._keeper.facade.settings import Durability, IdleTimeouts, LoginSettings
from session_keeper._keeper.lifecycle.browser_lifetime import BrowserLifetime
from session_keeper._keeper.lifecycle.conversations import Conversations
from session_keeper._keeper.lifecycle.restart_accounting import RestartAccounting
from session_keeper._keeper.lifecycle.sweeper import Sweeping
from session_keeper._keeper.logins.login_records import Logins
from session_keeper._keeper.logins.reissues import Reissues
from session_keeper._keeper.logins.renewal import Renewals
from session_keeper._keeper.logins.storage_state_io import StorageStates
from session_keeper._keeper.logins.web_storage_logins import StorageLogins
from session_keeper._keeper.permissions.granting import GrantDesk
from session_keeper._keeper.saving.persistence import KeeperPersistence
from session_keeper._keeper.state.live import KeeperLive
from session_keeper._keeper.tabs.conversation_pages import Tabs
from session_keeper._model.authorisation import Authorisation, RestartPolicy
from session_keeper._model.cookies import Cookie, normalize_site
from session_keeper._model.evidence import EvidenceTracker, parse_session_cookies
from session_keeper._model.facts import BrowserLost
from session_keeper._model.fingerprint import Fingerprinter, load_fingerprint_key
from session_keeper._model.grants import Grant, GrantBook, check_name
from session_keeper._security.audit import keyring_of as audit_keyring
from session_keeper._security.keyring import secret_forms
from session_keeper._security.vault import keyring_of as vault_keyring
from session_keeper._util.clock import Clock, SystemClock
from session_keeper._util.redact import remember_secrets
from session_keeper._util.validate import check_collection, check_mapping
from session_keeper.errors import InvalidArgument

if TYPE_CHECKING:
    from session_keeper._security.audit import AuditLog
    from session_keeper._security.keyring import Keyring
    from session_keeper._security.vault import LoginVault

__all__ = ["Parts", "jar_scrubbing", "wire"]


@attrs.frozen(kw_only=True)
class Parts(Generic[PageT]):
    """The keeper's parts, wired to one live state."""

    clock: Clock
    live: KeeperLive[PageT]
    persist: KeeperPersistence[PageT]
    authorisation: Authorisation
    lifetime: BrowserLifetime[PageT]
    tabs: Tabs[PageT]
    logins: Logins[PageT]
    renewals: Renewals[PageT]
    states: StorageStates[PageT]
    desk: GrantDesk[PageT]
    conversations: Conversations[PageT]
    sweeping: Sweeping[PageT]
    remember_jar: Callable[[Iterable[Cookie]], None]


def wire(
    owner: Any,
    backend: BrowserBackend[PageT],
    *,
    clock: Clock | None,
    grants: Iterable[Grant],
    actions: Iterable[str],
    restart_policy: Mapping[str, RestartPolicy] | None,
    on_browser_lost: Callable[[BrowserLost], None] | None,
    idle: IdleTimeouts,
    login: LoginSettings,
    durability: Durability,
) -> Parts[PageT]:
    """Check every setting of a :class:`~session_keeper.SessionKeeper`, then build its parts.

    ``owner`` is the facade: the tabs report blocked navigations through it, restart
    accounting hands it the new jar's values to scrub. Raises what the constructor
    documents (:class:`InvalidArgument`, :class:`InvalidArgumentType`), before building.
    """
    # The groups checked themselves when they were made; the rest is checked here.
    idle_timeout, tab_idle_timeout = idle.browser, idle.tab
    store, keyring, audit, vault = (
        durability.store,
        durability.keyring,
        durability.audit,
        durability.vault,
    )
    the_clock: Clock = clock if clock is not None else SystemClock()
    action_list = check_collection(actions, "actions")
    for a in action_list:
        check_name(a, "action")
    known = frozenset(action_list)
    grant_book = GrantBook(known)
    policy: dict[str, RestartPolicy] = dict.fromkeys(known, "stop")
    policies = check_mapping({} if restart_policy is None else restart_policy, "restart_policy")
    for action, p in policies.items():
        grant_book.check_action(action)
        if p not in ("stop", "relogin"):
            raise InvalidArgument(f"restart policy for {action!r} must be 'stop' or 'relogin'")
        policy[action] = p
    fingerprinter = Fingerprinter(load_fingerprint_key(login.fingerprint_key))
    probes = {
        normalize_site(check_name(site, "site")): probe for site, probe in login.probes.items()
    }
    # Which cookies carry each site's session: only they can be login evidence.
    cookies_by_site = parse_session_cookies(login.session_cookies)
    for g in check_collection(grants, "grants"):
        grant_book.add(g)
    keeper_id = durability.keeper_id
    if isinstance(backend, KeeperNamedBackend):
        backend.serve_keeper(keeper_id)  # its marker in a shared browser is this keeper's

    live: KeeperLive[PageT] = KeeperLive(
        clock=the_clock,
        idle_timeout=idle_timeout,
        grants=grant_book,
        fingerprinter=fingerprinter,
    )
    evidence = EvidenceTracker(fingerprinter, cookies_by_site)
    storage = StorageLogins(
        live, parse_session_cookies(login.storage_keys, what="storage_keys", item="storage key")
    )
    persist: KeeperPersistence[PageT] = KeeperPersistence(
        live, store=store, keeper_id=keeper_id, keyring=keyring, audit=audit
    )
    authorisation = Authorisation(grant_book, live.ledger, live.uses, policy)
    remember_jar = jar_scrubbing(owner, keyring=keyring, vault=vault, audit=audit)
    reissues: Reissues[PageT] = Reissues(live, persist, evidence, remember_jar)
    restarts: RestartAccounting[PageT] = RestartAccounting(
        live,
        persist,
        login_probes=probes,
        vault=vault,
        remember_jar=remember_jar,
        storage=storage,
        reissues=reissues,
    )
    lifetime: BrowserLifetime[PageT] = BrowserLifetime(
        live,
        persist,
        backend,
        restarts,
        evidence,
        on_browser_lost=on_browser_lost,
        keep_logins_on_idle_close=login.keep_on_idle_close,
        storage=storage,
    )
    tabs: Tabs[PageT] = Tabs(
        live, persist, evidence, tab_idle_timeout=tab_idle_timeout, owner=owner
    )
    # Every browser, launched or re-bound, tells the tabs where its pages commit.
    lifetime.add_launch_hook(tabs.observe)
    # ... and what its pages are answered with: a login cookie's re-issue is seen there.
    lifetime.add_launch_hook(reissues.observe)
    logins: Logins[PageT] = Logins(
        live,
        persist,
        evidence,
        login_probes=probes,
        session_cookies=cookies_by_site,
        vault=vault,
        storage=storage,
        baselines=tabs.baselines,
        sign_in_timeout=login.sign_in_timeout,
    )
    renewals: Renewals[PageT] = Renewals(
        live,
        persist,
        logins,
        recipes={normalize_site(site): r for site, r in login.recipes.items()},
        credentials=login.credentials,
        policy=login.renewal,
    )
    desk: GrantDesk[PageT] = GrantDesk(live, persist)
    conversations: Conversations[PageT] = Conversations(
        live, persist, conversation_idle_timeout=idle.conversation
    )
    sweeping: Sweeping[PageT] = Sweeping(
        live,
        persist,
        lifetime=lifetime,
        tabs=tabs,
        conversations=conversations,
        tab_idle_timeout=tab_idle_timeout,
    )
    return Parts(
        clock=the_clock,
        live=live,
        persist=persist,
        authorisation=authorisation,
        lifetime=lifetime,
        tabs=tabs,
        logins=logins,
        renewals=renewals,
        states=StorageStates(live, persist, logins, keyring),
        desk=desk,
        conversations=conversations,
        sweeping=sweeping,
        remember_jar=remember_jar,
    )


def jar_scrubbing(
    owner: object,
    *,
    keyring: Keyring | None,
    vault: LoginVault | None,
    audit: AuditLog | None,
) -> Callable[[Iterable[Cookie]], None]:
    """What makes a jar's cookie values, and the keys of the keeper's, vault's and audit
    log's keyrings, secrets every text is scrubbed of from then on (``owner``'s)."""
    keyrings = [] if keyring is None else [keyring]
    if vault is not None:
        keyrings.append(vault_keyring(vault))
    if audit is not None:
        keyrings.append(audit_keyring(audit))

    def remember(jar: Iterable[Cookie]) -> None:
        values = [c.value for c in jar]
        for each in keyrings:
            values += secret_forms(each)  # read each time: a keyring may gain keys
        remember_secrets(owner, values)

    return remember
