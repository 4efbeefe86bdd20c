"""The Guard's policy: may this conversation's request leave the browser? No browser needed.

Pure and synchronous: given a conversation, a URL, a method and (for counted reads) the
page load a request belongs to, :meth:`GuardPolicy.decide` answers a
:class:`GuardVerdict` from the keeper's logins and grants and the conversation's origin
allowlist. The Playwright mechanics (:mod:`session_keeper._guard.guard`) call it
for every request they intercept; tests and other adapters can call it alone.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

import attrs

from session_keeper._leaf.blocks import BlockRule
from session_keeper._model.cookies import Cookie, cookie_applies_to, normalize_site
from session_keeper._model.facts import PROBE_CONVERSATION, CookieFingerprint
from session_keeper._model.grants import check_name
from session_keeper._model.origins import AllowedOrigin, parse_origins, url_allowed
from session_keeper._model.verdict import GuardVerdict
from session_keeper._model.web import non_web_reason, origin_of, scheme_of
from session_keeper._util.surfaces import surface_for
from session_keeper._util.validate import check_collection, check_mapping
from session_keeper.errors import InvalidArgumentType

if TYPE_CHECKING:
    from session_keeper._keeper.facade.keeper import SessionKeeper

__all__ = ["READ_METHODS", "BlockRule", "GuardPolicy", "GuardVerdict", "origin_of"]

#: Methods that only read; every other method writes.
READ_METHODS: Final = frozenset({"GET", "HEAD"})


#: Schemes of what a page holds itself (no request leaves the browser for them).
_PASSIVE_SCHEMES: Final = frozenset({"about", "data", "blob"})


class GuardPolicy:
    """Decides requests from a keeper's logins and grants and per-conversation allowlists.

    ``actions`` maps a site to ``{method: action}`` overrides of the default mapping
    (``GET``/``HEAD`` → ``read``, anything else → ``write``). ``protect`` names extra
    sites to treat as signed in even before a login is recorded. ``allowlists`` sets
    initial per-conversation origin allowlists. Raises :class:`InvalidArgumentType` /
    :class:`InvalidArgument` for malformed configuration, at once.
    """

    def __init__(
        self,
        keeper: SessionKeeper[Any],
        *,
        actions: Mapping[str, Mapping[str, str]] | None = None,
        protect: Iterable[str] = (),
        allowlists: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._keeper = keeper
        self._actions: dict[str, dict[str, str]] = {}
        for site, mapping in check_mapping({} if actions is None else actions, "actions").items():
            if not isinstance(mapping, Mapping):
                raise InvalidArgumentType("actions must map a site to {method: action}")
            self._actions[normalize_site(check_name(site, "site"))] = {
                check_name(m, "method").upper(): check_name(a, "action") for m, a in mapping.items()
            }
        if isinstance(protect, str):
            raise InvalidArgumentType("protect must be a collection of sites, not a single str")
        self._protect = frozenset(
            normalize_site(check_name(s, "site")) for s in check_collection(protect, "protect")
        )
        self._allowlists: dict[str, tuple[AllowedOrigin, ...]] = {}
        self._hosts: tuple[int, frozenset[str]] | None = None
        # Grant and revoke calls seen: with the ledger's version, what settled_hosts keys on.
        self._grant_changes = 0
        self._settled: tuple[Hashable, frozenset[str]] | None = None
        # Followed from the first settled_hosts() on (nothing is cached before): a policy
        # refused at construction, or never asked, leaves no hook on the keeper.
        self._following_grants = False
        for conversation, origins in check_mapping(
            {} if allowlists is None else allowlists, "allowlists"
        ).items():
            self.allow_origins(conversation, origins)

    @property
    def keeper(self) -> SessionKeeper[Any]:
        """The keeper whose logins and grants this policy reads."""
        return self._keeper

    # -- configuration ------------------------------------------------------------------
    def allow_origins(self, conversation: str, origins: Iterable[str]) -> None:
        """Limit ``conversation`` to ``origins`` (``https://docs.example`` or bare hosts).

        Scheme and host must match an entry, the port only when the entry names one
        (``http://docs.example`` admits ``http://docs.example:8000``). Raises
        :class:`InvalidArgumentType` / :class:`InvalidArgument` for a malformed entry.
        """
        conversation = check_name(conversation, "conversation")
        self._allowlists[conversation] = parse_origins(check_collection(origins, "origins"))

    def clear_origins(self, conversation: str) -> None:
        """Remove ``conversation``'s allowlist (its grants still apply)."""
        self._allowlists.pop(check_name(conversation, "conversation"), None)

    def any_allowlist(self) -> bool:
        """Whether some conversation is limited to an origin allowlist."""
        return bool(self._allowlists)

    def has_allowlist(self, conversation: str | None) -> bool:
        """Whether ``conversation`` is limited to an origin allowlist."""
        return conversation is not None and conversation in self._allowlists

    # -- the decision ---------------------------------------------------------------------
    def protected_hosts(self) -> frozenset[str]:
        """Every host whose requests (its own and its subdomains') may carry a protected login.

        The hosts :meth:`protected_sites` can name, from recorded logins (their sites and
        their cookies' domains), lost logins and ``protect``: a request to any other host
        carries none of them. Cached until the keeper's login ledger changes.
        """
        # The ledger's change counter: read on every intercepted request, so no recompute.
        version = self._keeper.logins_version
        cached = self._hosts
        if cached is not None and cached[0] == version:
            return cached[1]
        hosts = set(self._protect)
        for record in self._keeper.logins():
            hosts.add(record.site)
            hosts.update(normalize_site(c.domain) for c in record.cookies)
        for lost in self._keeper.lost_logins():
            hosts.add(lost.name)
            hosts.update(self._keeper.lost_login_chain(lost.name))
        # A sign-in in progress: its hosts are guarded before its credentials exist.
        for window in self._keeper.sign_ins():
            hosts.update(window.hosts)
        for site, cookies in self._keeper.unexplained_logins().items():
            hosts.add(site)
            hosts.update(normalize_site(c.domain) for c in cookies)
        self._hosts = (version, frozenset(hosts))
        return self._hosts[1]

    def protected_sites(self, target: str) -> list[str]:
        """Every signed-in (or ``protect``-ed) site whose login cookies a request receives.

        ``target`` is the request's URL, or a bare host (then any path, any scheme).
        A login is carried where one of its cookies is sent by the browser's rules
        (:meth:`Cookie.sent_with`: a host-only cookie to its host only, path, ``Secure``);
        the login's own host is always protected, and so are its subdomains when the
        record names no cookie.
        """
        bare = "://" not in target
        url = f"https://{target}/" if bare else target
        host = urlsplit(url).hostname or ""
        sites: list[str] = []
        for record in self._keeper.logins():
            if (
                host == record.site
                or (not record.cookies and cookie_applies_to(record.site, host))
                or any(_carried(c, url, any_path=bare) for c in record.cookies)
            ):
                sites.append(record.site)
        # A lost login may leave cookies behind (a persistent one that survived):
        # its site stays guarded until someone records a login there again.
        sites.extend(
            lost.name
            for lost in self._keeper.lost_logins()
            if cookie_applies_to(lost.name, host)
            or any(cookie_applies_to(h, host) for h in self._keeper.lost_login_chain(lost.name))
        )
        # A login found at launch that no record explains: wherever its cookies go.
        sites.extend(
            site
            for site, cookies in sorted(self._keeper.unexplained_logins().items())
            if host == site or any(_carried(c, url, any_path=bare) for c in cookies)
        )
        sites.extend(s for s in sorted(self._protect) if cookie_applies_to(s, host))
        return list(dict.fromkeys(sites))

    def _grants_changed(self) -> None:
        self._grant_changes += 1

    def settled_hosts(self, parties: Collection[str | None]) -> frozenset[str]:
        """The :meth:`protected_hosts` that every one of ``parties`` may read for good
        (:meth:`standing_read`); none when ``parties`` is empty.

        Cached until a login, a grant, an allowlist or ``parties`` changes: the Guard
        asks before every paused request is let go, and only those can change it.
        """
        if not self._following_grants:
            self._keeper.add_grants_hook(self._grants_changed)
            self._following_grants = True
        hosts = self.protected_hosts()
        key = (
            self._keeper.logins_version,
            self._grant_changes,
            frozenset(parties),
            frozenset(self._allowlists),
        )
        cached = self._settled
        if cached is not None and cached[0] == key:
            return cached[1]
        settled = frozenset(
            host for host in hosts if parties and all(self.standing_read(p, host) for p in parties)
        )
        self._settled = (key, settled)
        return settled

    def standing_read(self, conversation: str | None, host: str) -> bool:
        """Whether ``conversation`` may read anything on ``host`` (any path, any scheme)
        until a grant or a login changes: every site whose login a request to ``host``
        may carry is read by a ``GET``, through an unlimited grant that never expires
        (or by the keeper's probe). Such reads need no per-request decision."""
        if conversation is None or self._allowlists:
            return False
        if self._signing_in_refusal(conversation, host, "GET") is not None:
            return False
        for site in self.protected_sites(host):
            if self.action(site, "GET") != "read":
                return False
            if conversation == PROBE_CONVERSATION:
                continue
            if not any(r.site == site for r in self._keeper.logins()):
                return False  # a lost login: its own rules, decided per request
            try:
                if not self._keeper.holds_standing_grant(conversation, site, "read"):
                    return False
            except Exception:
                return False
        return True

    def action(self, site: str, method: str) -> str:
        """The action a ``method`` request to ``site`` counts as."""
        override = self._actions.get(site, {}).get(method.upper())
        if override is not None:
            return override
        return "read" if method.upper() in READ_METHODS else "write"

    def decide(
        self,
        conversation: str | None,
        url: str,
        method: str,
        *,
        spend: bool = False,
        credentials: bool = True,
        page_load: Hashable | None = None,
        admitted: Collection[str] = (),
        page: Hashable | None = None,
        may_spend: bool = True,
    ) -> GuardVerdict:
        """Whether a request of ``conversation`` for ``url`` may leave the browser.

        A host that receives several sites' logins (``billing.example`` and
        ``api.billing.example``) passes only if every one of them permits it.
        With ``spend``, the request is about to leave: it is counted against a
        grant's ``uses`` (:meth:`SessionKeeper.admit`); ``page_load`` is the token of
        the page load it belongs to (a read use covers its page's further reads).
        ``credentials=False`` (a CORS preflight, which carries no cookie) checks only
        the allowlist. ``admitted`` names sites this very request was already admitted
        to (it is a redirect hop of it): a 307/308 hop of a write is the same write, not
        a second one, so those sites are neither asked nor counted again.
        ``page`` is the page making the request: an act :meth:`SessionKeeper.decide`
        armed admits only requests of the page (and URL) it was armed for.
        ``may_spend=False`` (a request the browser makes on its own, such as a
        favicon) never spends a counted use: it passes only where nothing is spent.
        ``conversation=None`` is a page nobody owns. Never raises for a refusal: a
        keeper that cannot answer is a refusal that says why.
        """
        origin = origin_of(url)
        if origin is None:
            if scheme_of(url) in _PASSIVE_SCHEMES:
                return GuardVerdict(allowed=True)  # content of the page itself
            # A paused request off the web (Chromium pauses file: documents): no grant
            # can name it, and it leads out of the conversation.
            reason = non_web_reason(url) or "not a web URL"
            return GuardVerdict(allowed=False, rule="scheme", reason=reason)
        method = method.upper()
        surface = surface_for(url)
        if surface is not None and not self._granted_surface(conversation, url, method):
            return GuardVerdict(
                allowed=False,
                rule="self",
                reason=f"{origin} is session_keeper's own {surface.kind} endpoint; "
                "a conversation's page may not reach it",
            )
        if conversation is not None:
            allowed = self._allowlists.get(conversation)
            if allowed is not None and not url_allowed(url, allowed):
                return GuardVerdict(
                    allowed=False,
                    rule="allowlist",
                    reason=f"{origin} is outside {conversation}'s origin allowlist",
                )
        verdict = GuardVerdict(allowed=True)
        if not credentials:
            return verdict
        signing = self._signing_in_refusal(conversation, url, method)
        if signing is not None:
            return signing
        sites = [s for s in self.protected_sites(url) if s not in admitted]
        # Every site first, spending nothing: a request refused for one site must not
        # use up another's grant. Nothing awaits in between, so the answers hold.
        would_spend = False
        for site in sites:
            verdict = self._login_verdict(
                conversation,
                site,
                method,
                mode="peek" if spend else "permits",
                page_load=page_load,
                page=page,
                url=url,
            )
            if not verdict.allowed:
                return verdict
            would_spend = would_spend or verdict.spent
            if verdict.spent and not may_spend:
                # Chromium fetches a tab's favicon whenever it likes (measured: after a
                # borrow was approved on the block page); that must not use it up.
                return GuardVerdict(
                    allowed=False,
                    rule="grant",
                    reason=f"a request the browser makes on its own never spends a use "
                    f"of {conversation}'s grant for {site}",
                    site=site,
                    action=verdict.action,
                )
        if not would_spend:
            # Reads and unlimited grants (nearly every request): nothing to spend,
            # so no second pass on this per-request path.
            return attrs.evolve(verdict, spent=False, sites=tuple(sites))
        spent = False
        for site in sites:
            verdict = self._login_verdict(
                conversation, site, method, mode="spend", page_load=page_load, page=page, url=url
            )
            if not verdict.allowed:
                return verdict  # cannot happen after the peek; refuse if it does
            spent = spent or verdict.spent
        return attrs.evolve(verdict, spent=spent, sites=tuple(sites))

    def allowlist(self, conversation: str | None) -> tuple[AllowedOrigin, ...] | None:
        """``conversation``'s origin allowlist; ``None`` when it has none."""
        return None if conversation is None else self._allowlists.get(conversation)

    def socket_verdict(
        self,
        conversation: str | None,
        target: str,
        *,
        page_load: Hashable | None = None,
        page: Hashable | None = None,
    ) -> GuardVerdict:
        """What a WebSocket no one can pause gets: a worker's, which Chromium refuses by
        rule (:mod:`session_keeper._guard.sockets`) before any decision could be asked.

        ``target`` is a ``ws:``/``wss:`` URL, or a bare host (then any path and port).
        Allowed only where its page's request would pass *spending nothing*, through a
        grant no clock can end (the rules are only re-sent on a change the keeper tells):
        a read its page load already spent a use on, or a standing grant. Spends nothing.
        """
        bare = "://" not in target
        if not bare:
            surface = surface_for(target)
            if surface is not None and not self._granted_surface(conversation, target, "GET"):
                return GuardVerdict(
                    allowed=False,
                    rule="self",
                    reason=f"{origin_of(target)} is session_keeper's own {surface.kind} "
                    "endpoint; a conversation's page may not reach it",
                )
            allowed = self.allowlist(conversation)
            if allowed is not None and not url_allowed(target, allowed):
                return GuardVerdict(
                    allowed=False,
                    rule="allowlist",
                    reason=f"{origin_of(target)} is outside {conversation}'s origin allowlist",
                )
        signing = self._signing_in_refusal(conversation, target, "GET")
        if signing is not None:
            return signing
        for site in self.protected_sites(target):
            verdict = self._login_verdict(
                conversation, site, "GET", mode="peek", page_load=page_load, page=page
            )
            if not verdict.allowed:
                return verdict
            if verdict.spent:
                return GuardVerdict(
                    allowed=False,
                    rule="grant",
                    reason=f"a worker's WebSocket cannot be paused to spend a use of "
                    f"{conversation}'s grant for {site}; its page load has not read {site}",
                    site=site,
                    action=verdict.action,
                )
            if self._expires(conversation, site):
                return GuardVerdict(
                    allowed=False,
                    rule="grant",
                    reason=f"{conversation}'s grant for {site} expires: a worker's WebSocket "
                    "is refused ahead of time, not judged when it opens",
                    site=site,
                    action=verdict.action,
                )
        return GuardVerdict(allowed=True)

    def _to_sign_in(
        self, conversation: str, site: str, action: str, *, refused: str, owner: str | None = None
    ) -> GuardVerdict:
        """A site with no live login: ``owner`` (a lost login's) and the site's grant holders
        may go there, to sign in; anyone else is refused with ``refused``."""
        try:
            entitled = conversation == owner or self._keeper.holds_grant(conversation, site, action)
        except Exception:
            entitled = False
        if entitled:
            return GuardVerdict(allowed=True, site=site, action=action)
        return GuardVerdict(allowed=False, rule="grant", reason=refused, site=site, action=action)

    def _signing_in_refusal(
        self, conversation: str | None, target: str, method: str
    ) -> GuardVerdict | None:
        """The refusal of a request that would carry what a sign-in in progress set, for
        anyone but the conversation signing in (``None``: no such sign-in stands in the way).

        ``target`` is a URL or a bare host. The keeper's own probe reads, as it does a
        login's. Whatever the sign-in sets there has an owner from its first instant.
        """
        if not self._keeper.any_sign_in():
            return None  # nearly every request: no parsing
        host = urlsplit(target if "://" in target else f"https://{target}/").hostname or ""
        signers = self._keeper.signing_in(host)
        if not signers or conversation in signers:
            return None
        if conversation == PROBE_CONVERSATION and method.upper() in READ_METHODS:
            return None
        who = ", ".join(sorted(signers))
        return GuardVerdict(
            allowed=False,
            rule="sign_in",
            reason=f"{who} is signing in through {host}: what that sign-in sets is "
            f"{who}'s alone until its login is recorded or the sign-in ends",
            site=host,
            action=self.action(host, method),
        )

    def _expires(self, conversation: str | None, site: str) -> bool:
        """Whether ``conversation``'s reads of ``site`` may rest on a grant that expires."""
        if conversation is None or conversation == PROBE_CONVERSATION:
            return False
        try:
            if self._keeper.holds_standing_grant(conversation, site, "read"):
                return False
            grants = self._keeper.grants()
        except Exception:
            return True
        return any(
            g.expires_at is not None
            for g in grants
            if (g.conversation, g.site) == (conversation, site)
        )

    def _granted_surface(self, conversation: str | None, url: str, method: str) -> bool:
        """Whether a grant of ``conversation`` names the host of a keeper surface."""
        if conversation is None or conversation == PROBE_CONVERSATION:
            return False
        try:
            site = normalize_site(urlsplit(url).hostname or "")
            return self._keeper.holds_grant(conversation, site, self.action(site, method))
        except Exception:
            return False

    def _login_verdict(
        self,
        conversation: str | None,
        site: str,
        method: str,
        *,
        mode: Literal["permits", "peek", "spend"],
        page_load: Hashable | None = None,
        page: Hashable | None = None,
        url: str | None = None,
    ) -> GuardVerdict:
        action = self.action(site, method)
        if conversation is None:
            return GuardVerdict(
                allowed=False,
                rule="unowned",
                reason=f"a page no conversation owns may not use the login to {site}",
                site=site,
                action=action,
            )
        if conversation == PROBE_CONVERSATION:
            if method in READ_METHODS:
                return GuardVerdict(allowed=True, site=site, action="read")
            return GuardVerdict(
                allowed=False,
                rule="grant",
                reason=f"the keeper's login probe may only read {site}",
                site=site,
                action=action,
            )
        if site in self._keeper.unexplained_logins():
            return GuardVerdict(
                allowed=False,
                rule="unexplained",
                reason=f"the browser holds a login to {site} that no record explains; "
                "no conversation may use it until record_login() or a person "
                "(attribute_login()) says whose it is",
                site=site,
                action=action,
            )
        lost = next((x for x in self._keeper.lost_logins() if x.name == site), None)
        if lost is not None and not any(r.site == site for r in self._keeper.logins()):
            # Only its owner and its grantees may go there: to sign in again.
            return self._to_sign_in(
                conversation,
                site,
                action,
                owner=lost.owner,
                refused=f"the login to {site} (belonged to {lost.owner}) was lost; "
                f"{conversation} holds no grant for it",
            )
        if site in self._protect and not any(r.site == site for r in self._keeper.logins()):
            # Protected before anyone signs in: its grant holders may go there, to sign in.
            return self._to_sign_in(
                conversation,
                site,
                action,
                refused=f"{site} is protected and {conversation} holds no grant to {action} there",
            )
        try:
            if mode != "permits":
                # Counted, reads and writes alike: a read use is one page load (the
                # page's further reads ride on it), a write use is one request.
                decision = self._keeper.admit(
                    conversation,
                    site,
                    action,
                    dry_run=mode == "peek",
                    page_load=page_load if action == "read" else None,
                    page=page,
                    url=url,
                )
            else:
                decision = self._keeper.permits(conversation, site, action)
        except Exception as exc:
            # An action the keeper does not know, a closed keeper: refuse, say why.
            return GuardVerdict(
                allowed=False,
                rule="grant",
                reason=f"cannot decide {action} on {site}: {type(exc).__name__}",
                site=site,
                action=action,
            )
        if decision.outcome == "act":
            return GuardVerdict(allowed=True, site=site, action=action, spent=decision.spent_use)
        reason = decision.reason or f"{conversation} may not {action} on {site}"
        return GuardVerdict(allowed=False, rule="grant", reason=reason, site=site, action=action)


def _carried(cookie: CookieFingerprint, url: str, *, any_path: bool = False) -> bool:
    """Whether a request to ``url`` carries the fingerprinted cookie (the browser's rules).

    ``any_path``: some request to that host (path and scheme aside). A partitioned
    cookie is judged as unpartitioned: it may be carried more widely.
    """
    jar = Cookie(
        name=cookie.name,
        value="",
        domain=cookie.domain if cookie.host_only else "." + cookie.domain,
        path="/" if any_path else cookie.path,
        secure=cookie.secure and not any_path,
    )
    return jar.sent_with(url)
