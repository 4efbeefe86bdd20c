"""Every exception session_keeper raises: one tree, rooted at SessionKeeperError.

::

    SessionKeeperError
    ├── UsageError                     you asked for something invalid (nothing changed)
    │   ├── InvalidArgument            (also a ValueError)
    │   │   ├── InvalidArgumentType    (also a TypeError)
    │   │   └── TokenFileUnreadable    the MCP tokens file is not one (encoding, JSON, mode)
    │   ├── KeeperClosedError          you closed the keeper, then used it
    │   ├── LoginNotObserved           record_login() saw no evidence of a sign-in
    │   │   ├── LoginAccountMismatch   the site's probe sees another account than the one given
    │   │   └── LoginNotYours          another's login, and no fresh sign-in of the caller's own
    │   ├── LoginStillMissing          resume() of a job paused for a login nobody recorded since
    │   ├── GuardUnsupported           a Guard was attached to a browser it cannot enforce on
    │   ├── GuardAlreadyAttached       a second Guard was made for a keeper that has one
    │   ├── InvalidTransition          a job or external write cannot move to that state
    │   ├── SelfApprovalRefused        a conversation answered its own borrow request
    │   ├── CredentialMissing          a CredentialSource holds no such value (also a LookupError)
    │   ├── MissingExtra               an optional part's extra is missing (a ModuleNotFoundError)
    │   └── TooManyPendingRequests     a conversation has too many borrow requests pending
    ├── PolicyRefusal                  a rule of the keeper refused what you asked (nothing broke)
    │   ├── NavigationBlocked          the Guard refused a tab's navigation (.block says why)
    │   ├── UploadRefused              a file to upload is outside the directories allowed
    │   └── RenewalRefused             the caller may not renew that site's login
    ├── BrowserError                   the browser broke underneath you
    │   ├── BrowserGoneError           the browser died since your last ensure()
    │   ├── LoginProbeFailed           a site's LoginProbe raised or timed out: it tells nothing
    │   ├── NavigationError            a navigation failed, timed out or was replaced by another
    │   └── BrowserLaunchError         a browser could not be started
    │       ├── ChromiumNotFound       no Chromium executable anywhere we looked
    │       └── ProfileInUse           a live browser already holds the profile
    ├── StoreError                     the durable store refused or broke
    │   ├── StoreCorrupt               the file or rows are not what we wrote
    │   ├── SchemaVersionError         written by a newer (or unknown) schema
    │   ├── StaleLeaseError            a fencing token or revision is out of date
    │   │   └── ProfileLeaseLost       a profile lease expired or was taken: its holder is fenced
    │   ├── LeaseHeldError             another worker holds the job's lease
    │   │   └── ProfileHeld            another worker (or pool) holds the profile's lease
    │   ├── JobNotFound                no job with that id (also a LookupError)
    │   ├── ArtifactNotFound           the artifact was never written or was collected
    │   ├── StoreBusy                  the store stayed locked longer than the busy timeout
    │   └── UnsavedChanges             not written yet; kept in order, persist() retries
    ├── ContractError                  a job contract is malformed
    ├── StepFailure                    a job step says why it failed; the loop picks the policy
    │   ├── TransientFailure           retry with full-jitter backoff inside the budgets
    │   ├── RateLimited                honour the server's delay (retry_after)
    │   ├── PageChanged                changed page, stale reference, unexpected navigation
    │   ├── LoginRequired              expired login, challenge, permission doubt: ask a human
    │   │   └── SignedOut              the site shows it is signed out: report it, ask a human
    │   ├── Denied                     explicit denial or forbidden action: stop
    │   └── WriteOutcomeUnknown        an external write may or may not have happened
    └── IntegrityError                 sealed data or the audit trail do not check out
        ├── KeyringError               no usable sealing key: missing, malformed or too short
        ├── UnknownKey                 sealed under a key id the keyring does not hold
        ├── SealBroken                 a sealed value was altered, or opened with the wrong key
        └── AuditTampered              an audit entry was edited, deleted or reordered

"You closed it" (:class:`KeeperClosedError`) is kept apart from "it broke underneath
you" (:class:`BrowserError`): the first is a bug in the caller, the second is a fact
about the world the caller must handle. A refusal (:class:`PolicyRefusal`) is neither:
the keeper's policy answered, as it should; what helps is a grant, not a retry or
``ensure()``.


No message in this tree ever carries a cookie value, password or token.
"""

from __future__ import annotations

import typing

if typing.TYPE_CHECKING:
    from session_keeper._leaf.blocks import BlockRecord


class SessionKeeperError(Exception):
    """Base of every error session_keeper raises."""


class UsageError(SessionKeeperError):
    """The caller asked for something invalid; nothing was changed."""


class InvalidArgument(UsageError, ValueError):
    """An argument has a valid type but an invalid value (an empty site, an unknown action)."""


class InvalidArgumentType(InvalidArgument, TypeError):
    """An argument has the wrong type (a conversation id that is not a ``str``)."""


class TokenFileUnreadable(InvalidArgument):
    """The MCP server's tokens file cannot be read as one: not UTF-8, not the expected
    JSON (malformed, nested too deep, a wrong shape or version), unreadable, or
    writable by other users. A server that meets one refuses every client until the
    file is fixed; the message names the file, never a token or a digest."""


class KeeperClosedError(UsageError):
    """The keeper was closed by its owner and cannot be used any more."""


class LoginNotObserved(UsageError):
    """``record_login()`` saw no evidence of a sign-in; nothing was recorded.

    No session cookie of the site appeared or changed since the sign-in began (or none
    of the configured session cookies is present), or the site's login probe sees
    nobody signed in, or the probe failed.
    """


class LoginAccountMismatch(LoginNotObserved):
    """The site's login probe sees another account than the ``account`` given; nothing recorded."""


class LoginNotYours(LoginNotObserved):
    """``record_login()`` by a conversation whose own sign-in cannot be what changed the jar.

    Another conversation holds (or held, before it was lost) the login to the site, and
    this conversation either began no sign-in there (no ``begin_login()``, no navigation
    of its own tab to the site: a change "since the browser started" may be the owner's),
    or holds no grant to write on the site (a sign-in posts credentials, which a page
    that may only read cannot have done), or only the site's probe vouches (it says
    someone is signed in, not who signed in). Nothing was recorded; a person can move a
    login on purpose.
    """


class LoginStillMissing(UsageError):
    """``resume()`` of a job paused for a login: no login to its site was recorded since the pause.

    Nothing was changed; sign in, ``record_login()``, then resume again.
    """


class GuardUnsupported(UsageError):
    """A :class:`~session_keeper.Guard` was attached to a browser it cannot enforce on.

    The Guard enforces on the network of a Playwright browser; on any other backend it
    refuses to start rather than let requests through unguarded.
    """


class GuardAlreadyAttached(UsageError):
    """A :class:`~session_keeper.Guard` was made for a keeper that already has one.

    A keeper's browser has one interception layer: two Guards would each decide (and
    count) every request. Close the first (``await guard.aclose()``) to attach another.
    """


class InvalidTransition(UsageError):
    """A job (or an external write) cannot move from its current state to the one asked for."""


class MissingExtra(UsageError, ModuleNotFoundError):
    """An optional part of session_keeper (the console, the MCP server, LangGraph,
    PostgreSQL, OpenTelemetry, the OS keyring) needs an extra that is not installed.

    The message names the module missing and the ``pip install 'session-keeper[EXTRA]'``
    that brings it; ``name`` is the missing module. Also a :class:`ModuleNotFoundError`,
    so code that imports an optional face inside ``except ImportError`` keeps working.
    """


class SelfApprovalRefused(UsageError):
    """A borrow request was answered by the conversation that filed it; nothing changed.

    A borrow is approved by the login's owner, a person or the application, never by the
    requester: an agent that could answer its own question would need no permission.
    """


class TooManyPendingRequests(UsageError):
    """The conversation already has as many borrow requests pending as it may; nothing filed."""


class CredentialMissing(UsageError, LookupError):
    """A :class:`~session_keeper.security.CredentialSource` holds no value for that site and field;
    the message names the site and field, never a value. Nothing was typed."""


class BrowserError(SessionKeeperError):
    """The browser broke underneath the caller."""


class BrowserGoneError(BrowserError):
    """The browser this call needs died or was closed; ``ensure()`` says what was lost."""


class PolicyRefusal(SessionKeeperError):
    """A rule of the keeper (a grant, the Guard) refused what was asked: nothing broke,
    nothing was invalid, nothing changed; a grant, not a retry, is what would help."""


class NavigationBlocked(PolicyRefusal):
    """The Guard refused a navigation of a conversation's tab; ``block`` says why.

    The tab keeps the document it showed (or, when it showed none, the Guard's local
    403 page); the URL was not recorded as verified. Nothing broke: it is a
    :class:`PolicyRefusal`, never a :class:`BrowserError`.
    """

    def __init__(self, message: str, *, block: BlockRecord) -> None:
        super().__init__(message)
        #: The Guard's record of the refusal (names, origin and path; never a secret).
        self.block = block


class UploadRefused(PolicyRefusal):
    """A file to upload (or drop) is not inside a directory uploads may come from, after
    symlinks and ``..`` are resolved, or uploads are off; nothing was read or sent."""


class RenewalRefused(PolicyRefusal):
    """The conversation may not renew the site's login: it neither owns it nor holds a
    grant on the site, the site has no sign-in recipe, or a person has taken over the
    owner's tab. Nothing was typed."""


class LoginProbeFailed(BrowserError):
    """A site's :data:`LoginProbe` raised or timed out: it says nothing about the login."""


class NavigationError(BrowserError):
    """A navigation the keeper was asked for did not finish: the site did not answer or
    refused, it timed out, or another navigation (the page's own, or one started on the
    page directly) replaced it. The browser is still alive; the page is where it ended."""


class BrowserLaunchError(BrowserError):
    """A browser could not be started.

    When Chromium itself failed, the message quotes the last lines it wrote to stderr
    (URL queries and known secrets cut out) and, for the common causes, the fix: no
    display for a headed browser, the sandbox as root, a missing shared library."""


class ChromiumNotFound(BrowserLaunchError):
    """No Chromium executable was found; the message lists where we looked."""


class ProfileInUse(BrowserLaunchError):
    """A live browser already uses the profile directory."""


class StoreError(SessionKeeperError):
    """The durable store refused an operation or is unusable."""


class StoreCorrupt(StoreError):
    """The store's file or rows are not in a shape session_keeper wrote."""


class SchemaVersionError(StoreError):
    """The store or a checkpoint carries a schema version this code does not know."""


class StaleLeaseError(StoreError):
    """A lease, fencing token or checkpoint revision is out of date; the write was rejected."""


class ProfileLeaseLost(StaleLeaseError):
    """A profile lease expired or was taken over: its holder is fenced, its write refused."""


class LeaseHeldError(StoreError):
    """Another worker holds an unexpired lease on the job."""


class ProfileHeld(LeaseHeldError):
    """Another holder has an unexpired lease on the browser profile."""


class JobNotFound(StoreError, LookupError):
    """The store holds no job with that id."""


class ArtifactNotFound(StoreError):
    """The artifact was never written (and verified), or was collected as unreferenced."""


class StoreBusy(StoreError):
    """The store stayed locked by other writers for longer than the configured busy timeout."""


class UnsavedChanges(StoreError):
    """A durable change (keeper state or an audit entry) could not be written.

    The change is kept, in order; the next ``persist()`` writes it. The store's own
    error is the ``__cause__``.
    """


class ContractError(SessionKeeperError, ValueError):
    """A job contract is malformed."""


class StepFailure(SessionKeeperError):
    """Raised by a job step to classify a failure; the job loop owns the retry policy."""


class TransientFailure(StepFailure):
    """A read or transport failure worth retrying within the job's budgets."""


class RateLimited(StepFailure):
    """The site asked us to slow down; ``retry_after`` is its delay in seconds."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PageChanged(StepFailure):
    """The page is not the one expected: observe again, verify identity, recover (bounded)."""


class LoginRequired(StepFailure):
    """The login expired, a challenge appeared or permission is uncertain: pause for a person."""


class SignedOut(LoginRequired):
    """The site shows it is signed out (its sign-in page, a server-side expiry).

    The job loop reports it to the keeper (``report_signed_out``) and pauses for a person.
    """


class Denied(StepFailure):
    """The site refused outright, or the action is forbidden: stop, never retry another way."""


class WriteOutcomeUnknown(StepFailure):
    """An external write was submitted but its outcome cannot be established."""


class IntegrityError(SessionKeeperError):
    """Sealed data or the audit trail does not check out; nothing was acted on or written."""


class KeyringError(IntegrityError):
    """No usable sealing key: none configured, or one that is malformed or too short."""


class UnknownKey(IntegrityError):
    """A sealed value names a key id the keyring does not hold (a key was dropped too early)."""


class SealBroken(IntegrityError):
    """A sealed value failed authentication: it was altered, or the key under its id is wrong."""


class AuditTampered(IntegrityError):
    """The audit chain is broken: an entry was edited, deleted, inserted or reordered."""


__all__ = [
    "ArtifactNotFound",
    "AuditTampered",
    "BrowserError",
    "BrowserGoneError",
    "BrowserLaunchError",
    "ChromiumNotFound",
    "ContractError",
    "CredentialMissing",
    "Denied",
    "GuardAlreadyAttached",
    "GuardUnsupported",
    "IntegrityError",
    "InvalidArgument",
    "InvalidArgumentType",
    "InvalidTransition",
    "JobNotFound",
    "KeeperClosedError",
    "KeyringError",
    "LeaseHeldError",
    "LoginAccountMismatch",
    "LoginNotObserved",
    "LoginNotYours",
    "LoginProbeFailed",
    "LoginRequired",
    "LoginStillMissing",
    "MissingExtra",
    "NavigationBlocked",
    "NavigationError",
    "PageChanged",
    "PolicyRefusal",
    "ProfileHeld",
    "ProfileInUse",
    "ProfileLeaseLost",
    "RateLimited",
    "RenewalRefused",
    "SchemaVersionError",
    "SealBroken",
    "SelfApprovalRefused",
    "SessionKeeperError",
    "SignedOut",
    "StaleLeaseError",
    "StepFailure",
    "StoreBusy",
    "StoreCorrupt",
    "StoreError",
    "TokenFileUnreadable",
    "TooManyPendingRequests",
    "TransientFailure",
    "UnknownKey",
    "UnsavedChanges",
    "UploadRefused",
    "UsageError",
    "WriteOutcomeUnknown",
]
