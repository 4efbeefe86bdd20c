"""Login evidence: which cookies prove that a sign-in happened, and which never can.

A cookie is not a login. Sites set cookies before anyone signs in (a CSRF token, a
consent or locale cookie) and keep them after a failed sign-in. So ``record_login``
records a login only on evidence, in this order:

1. **Named session cookies.** When the keeper is configured with the cookie names that
   carry a site's session
   (``LoginSettings(session_cookies={"billing.example": ["sid"]})``), only those cookies
   can be evidence; other cookies of the site are ignored.
2. **What the sign-in changed.** Of those candidates (all of the site's cookies when
   none are named), evidence is what appeared or changed (by keyed fingerprint) since
   the sign-in began. A cookie that existed before and is unchanged is never evidence,
   and neither is a cookie that already vouched for an earlier record of the site.
3. **The site's LoginProbe**, run at record time, must see someone signed in. When it
   does and no cookie changed, the candidates present are taken as the login's cookies
   (the probe, not the jar, is then the evidence).

When did the sign-in begin? At :meth:`SessionKeeper.begin_login`, when it was called;
otherwise at the conversation's last ``tab(url)`` navigation to the site (the jar as it
ended, or as the next act found it where only the keeper's handles act: see
``NavigationBaselines``); otherwise when the browser launched. Baselines are keyed
fingerprints held in memory for the live generation only — never values, never persisted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal
from urllib.parse import urlsplit

from session_keeper._model.cookies import Cookie, cookie_applies_to, normalize_site
from session_keeper._model.facts import CookieFingerprint
from session_keeper._model.fingerprint import Fingerprinter
from session_keeper._model.grants import check_name
from session_keeper.errors import InvalidArgument, InvalidArgumentType, LoginNotObserved

#: A cookie's identity in the jar: (name, domain without a leading dot, path).
CookieId = tuple[str, str, str]

#: Fingerprints of a site's cookies at one moment.
Snapshot = dict[CookieId, str]

#: Where a record's baseline came from, for the error message.
BaselineKind = Literal["begin_login", "navigation", "launch"]

#: At most this many hosts per conversation keep a navigation baseline.
MAX_HOSTS_PER_CONVERSATION = 32


def cookie_id(cookie: Cookie) -> CookieId:
    """The jar identity of ``cookie`` (a value change keeps it)."""
    return (cookie.name, cookie.domain.lstrip("."), cookie.path)


def parse_session_cookies(
    config: Mapping[str, Iterable[str]] | None,
    *,
    what: str = "session_cookies",
    item: str = "session cookie name",
) -> dict[str, frozenset[str]]:
    """Validate ``session_cookies=``: site -> the cookie names that carry its session
    (``storage_keys=``, site -> web storage keys, has the same shape: ``what``/``item``).

    Raises :class:`InvalidArgumentType` for a mapping or name list of the wrong type
    (a bare string is refused: it is not a list of names) and
    :class:`InvalidArgument` for an empty list or name.
    """
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise InvalidArgumentType(f"{what} must be a mapping of site -> {item}s")
    parsed: dict[str, frozenset[str]] = {}
    for site, names in config.items():
        site = normalize_site(check_name(site, "site"))
        if isinstance(names, (str, bytes)) or not isinstance(names, Iterable):
            raise InvalidArgumentType(f"{what}[{site!r}] must be a list of {item}s, not a string")
        clean = frozenset(check_name(n, item) for n in names)
        if not clean:
            raise InvalidArgument(f"{what}[{site!r}] names no {item}")
        parsed[site] = clean
    return parsed


def _related(host: str, site: str) -> bool:
    return cookie_applies_to(site, host) or cookie_applies_to(host, site)


class EvidenceTracker:
    """Baselines of the live generation, and the evidence that was already spent."""

    def __init__(
        self,
        fingerprinter: Fingerprinter,
        session_cookies: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self._fp = fingerprinter
        self._session_cookies = dict(session_cookies or {})
        self._launch_snapshot: Snapshot = {}
        self._navigated: dict[str, dict[str, Snapshot]] = {}
        self._begun: dict[tuple[str, str], Snapshot] = {}
        #: The browser's document-response number at begin_login (when it reports them).
        self._begun_seq: dict[tuple[str, str], int] = {}
        self._spent: dict[str, set[tuple[CookieId, str]]] = {}

    def snapshot(self, jar: Sequence[Cookie], host: str | None = None) -> Snapshot:
        """Fingerprints of ``jar``'s cookies (those sent to ``host`` when given)."""
        return {cookie_id(c): self._fp.digest(c) for c in jar if host is None or c.applies_to(host)}

    def reset(self, jar: Sequence[Cookie]) -> None:
        """A new browser: every old baseline is about a dead jar; the launch jar is the base."""
        self._launch_snapshot = self.snapshot(jar)
        self._navigated.clear()
        self._begun.clear()
        self._begun_seq.clear()
        self._spent.clear()

    @property
    def configured_sites(self) -> frozenset[str]:
        """The sites ``session_cookies`` names (the configuration says they hold logins)."""
        return frozenset(self._session_cookies)

    def unexplained(
        self, jar: Sequence[Cookie], sites: Iterable[str], explained: Iterable[str]
    ) -> dict[str, tuple[CookieFingerprint, ...]]:
        """Of ``sites`` (the configuration says they hold logins), those whose cookies in
        ``jar`` no record explains (``explained``: sites with a record), with the cookies
        that may carry a login (only the named ``session_cookies`` when configured)."""
        known = set(explained)
        found: dict[str, tuple[CookieFingerprint, ...]] = {}
        for site in sorted(set(sites) - known):
            names = self._session_cookies.get(site)
            cookies = sorted(
                (c for c in jar if c.applies_to(site) and (names is None or c.name in names)),
                key=cookie_id,
            )
            if cookies:
                found[site] = tuple(self._fp.fingerprint(c) for c in cookies)
        return found

    def navigated(self, conversation: str, url: str, jar: Sequence[Cookie]) -> None:
        """The conversation's tab() landed on ``url``: the site's cookies before a sign-in."""
        hostname = urlsplit(url).hostname
        if not hostname:
            return  # about:blank, data: ...: no site, no cookies to remember
        host = normalize_site(hostname)
        hosts = self._navigated.setdefault(conversation, {})
        hosts.pop(host, None)  # re-insert: the newest host is last
        hosts[host] = self.snapshot(jar, host)
        while len(hosts) > MAX_HOSTS_PER_CONVERSATION:
            del hosts[next(iter(hosts))]

    def begin(
        self, conversation: str, site: str, jar: Sequence[Cookie], seq: int | None = None
    ) -> None:
        """An explicit start of a sign-in: this baseline wins until the login is recorded.

        ``seq``: the number the browser's next document response gets, when it reports
        them: the sign-in window's responses are those from it on.
        """
        # The whole jar: a sign-in through an identity provider sets cookies on hosts
        # nobody can name in advance (its chain), and they are evidence of nothing
        # that was there before.
        self._begun[(conversation, site)] = self.snapshot(jar)
        if seq is None:
            self._begun_seq.pop((conversation, site), None)
        else:
            self._begun_seq[(conversation, site)] = seq

    def signing_in(self, site: str) -> bool:
        """Whether any conversation's sign-in to ``site`` is open (``begin`` was called and
        no login recorded since), in this browser."""
        return any(s == site for _, s in self._begun)

    def any_signing_in(self) -> bool:
        """Whether any conversation's sign-in is open (``begin`` called, nothing recorded
        or abandoned since), in this browser."""
        return bool(self._begun)

    def begun_at(self, conversation: str, site: str) -> int | None:
        """The first document response of the sign-in ``begin`` started, if known."""
        return self._begun_seq.get((conversation, site))

    def baseline(self, conversation: str, site: str) -> tuple[BaselineKind, Snapshot]:
        """The jar as it was when the conversation's sign-in to ``site`` began."""
        begun = self._begun.get((conversation, site))
        if begun is not None:
            return "begin_login", begun
        hosts = self._navigated.get(conversation, {})
        for host in reversed(hosts):
            if _related(host, site):
                return "navigation", hosts[host]
        return "launch", self._launch_snapshot

    def select(
        self,
        conversation: str,
        site: str,
        jar: Sequence[Cookie],
        session_names: frozenset[str] | None,
    ) -> tuple[list[Cookie], list[Cookie], BaselineKind]:
        """(changed, candidates, baseline kind) of ``site``'s cookies in ``jar``.

        Raises :class:`LoginNotObserved` when named session cookies are configured and
        none of them is in the jar.
        """
        candidates = sorted(
            (
                c
                for c in jar
                if c.applies_to(site) and (session_names is None or c.name in session_names)
            ),
            key=cookie_id,
        )
        if session_names is not None and not candidates:
            others = self.others_changed(conversation, site, jar)
            did = f" (cookies of {site} that did change: {', '.join(others)})" if others else ""
            raise LoginNotObserved(
                f"none of {site}'s session cookies ({', '.join(sorted(session_names))}) is in "
                f"the browser{did}; call record_login() after the sign-in has completed"
            )
        kind, base = self.baseline(conversation, site)
        changed = self._changed(site, candidates, base)
        return changed, candidates, kind

    def _changed(self, site: str, cookies: Iterable[Cookie], base: Snapshot) -> list[Cookie]:
        spent = self._spent.get(site, set())
        changed = []
        for c in cookies:
            digest = self._fp.digest(c)
            if base.get(cookie_id(c)) != digest and (cookie_id(c), digest) not in spent:
                changed.append(c)
        return changed

    def chain_changed(
        self, conversation: str, site: str, jar: Sequence[Cookie], hosts: Iterable[str]
    ) -> list[Cookie]:
        """Cookies of the sign-in's other ``hosts`` (its chain: an identity provider) that
        appeared or changed since :meth:`begin` — not ``site``'s own, which
        :meth:`select` judges. Empty without a ``begin`` (no chain is known then)."""
        begun = self._begun.get((conversation, site))
        if begun is None:
            return []
        others = [h for h in hosts if not cookie_applies_to(site, h)]
        mine = sorted(
            (c for c in jar if not c.applies_to(site) and any(c.applies_to(h) for h in others)),
            key=cookie_id,
        )
        return [c for c in mine if begun.get(cookie_id(c)) != self._fp.digest(c)]

    def set_in_window(
        self, conversation: str, site: str, jar: Sequence[Cookie], hosts: Iterable[str]
    ) -> list[Cookie]:
        """Every cookie of ``hosts`` (the site and its chain) that appeared or changed
        since :meth:`begin`: what a sign-in that ends without a login leaves behind."""
        begun = self._begun.get((conversation, site))
        if begun is None:
            return []
        hosts = list(hosts)
        return sorted(
            (
                c
                for c in jar
                if any(c.applies_to(h) for h in hosts)
                and begun.get(cookie_id(c)) != self._fp.digest(c)
            ),
            key=cookie_id,
        )

    def abandon(self, conversation: str, site: str) -> None:
        """The sign-in ended without a login: its baseline goes (nothing was spent)."""
        self._begun.pop((conversation, site), None)
        self._begun_seq.pop((conversation, site), None)

    def others_changed(self, conversation: str, site: str, jar: Sequence[Cookie]) -> list[str]:
        """Names of any of ``site``'s cookies that changed since the sign-in began (for an
        error that must say what did change when the configured names did not)."""
        _, base = self.baseline(conversation, site)
        mine = [c for c in jar if c.applies_to(site)]
        return sorted({c.name for c in self._changed(site, mine, base)})

    def recorded(self, conversation: str, site: str, evidence: Iterable[Cookie]) -> None:
        """These cookies vouched for a login: they are never evidence of another one."""
        self._begun.pop((conversation, site), None)
        self._begun_seq.pop((conversation, site), None)
        spent = self._spent.setdefault(site, set())
        spent.update((cookie_id(c), self._fp.digest(c)) for c in evidence)


def not_observed(
    site: str,
    kind: BaselineKind,
    browser_id: str | None,
    *,
    session_names: frozenset[str] | None = None,
    others: Sequence[str] = (),
) -> LoginNotObserved:
    """The error for a sign-in that changed none of the site's (session) cookies.

    With configured ``session_names`` it names them, and ``others``: the site's cookies
    that did change (names only), which is what a wrong configuration looks like.
    """
    since = {
        "begin_login": "begin_login()",
        "navigation": "this conversation's last tab() navigation to it",
        "launch": f"{browser_id or 'the browser'} started",
    }[kind]
    if session_names is not None:
        named = ", ".join(sorted(session_names))
        did = (
            f"; cookies of {site} that did change: {', '.join(others)} — is "
            "session_cookies= naming the wrong cookie?"
            if others
            else "; no other cookie of it changed either"
        )
        return LoginNotObserved(
            f"none of {site}'s configured session cookies ({named}) appeared or changed "
            f"since {since}{did}. Nothing recorded"
        )
    return LoginNotObserved(
        f"no cookie of {site} appeared or changed since {since}: no sign-in observed. "
        "Call record_login() after the sign-in has completed (and begin_login() before "
        "it, when the conversation navigates the site in between)"
    )
