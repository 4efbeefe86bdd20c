"""Every exception session_keeper raises: one tree, rooted at SessionKeeperError.

::

    SessionKeeperError
    ├── UsageError                     you asked for something invalid (nothing changed)
    │   ├── InvalidArgument            (also a ValueError)
    │   │   └── InvalidArgumentType    (also a TypeError)
    │   ├── KeeperClosedError          you closed the keeper, then used it
    │   ├── LoginNotObserved           record_login() saw no evidence of a sign-in
    │   │   ├── LoginAccountMismatch   the site's probe sees another account than the one given
    │   │   └── LoginNotYours          another's login, and no fresh sign-in of the caller's own
    │   ├── LoginStillMissing          resume() of a job paused for a login nobody recorded since
    │   ├── GuardUnsupported           a Guard was attached to a browser it cannot enforce on
    │   ├── InvalidTransition          a job or external write cannot move to that state
    │   ├── SelfApprovalRefused        a conversation answered its own borrow request
    │   └── TooManyPendingRequests     a conversation has too many borrow requests pending
    ├── BrowserError                   the browser broke underneath you
    │   ├── BrowserGoneError           the browser died since your last ensure()
    │   ├── NavigationBlocked          the Guard refused a tab's navigation (.block says why)
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
about the world the caller must handle.

No message in this tree ever carries a cookie value, password or token.
"""

from session_keeper._errors import (
    ArtifactNotFound,
    AuditTampered,
    BrowserError,
    BrowserGoneError,
    BrowserLaunchError,
    ChromiumNotFound,
    ContractError,
    Denied,
    GuardUnsupported,
    IntegrityError,
    InvalidArgument,
    InvalidArgumentType,
    InvalidTransition,
    JobNotFound,
    KeeperClosedError,
    KeyringError,
    LeaseHeldError,
    LoginAccountMismatch,
    LoginNotObserved,
    LoginNotYours,
    LoginProbeFailed,
    LoginRequired,
    LoginStillMissing,
    NavigationBlocked,
    NavigationError,
    PageChanged,
    ProfileHeld,
    ProfileInUse,
    ProfileLeaseLost,
    RateLimited,
    SchemaVersionError,
    SealBroken,
    SelfApprovalRefused,
    SessionKeeperError,
    SignedOut,
    StaleLeaseError,
    StepFailure,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    TooManyPendingRequests,
    TransientFailure,
    UnknownKey,
    UnsavedChanges,
    UsageError,
    WriteOutcomeUnknown,
)

__all__ = [
    "ArtifactNotFound",
    "AuditTampered",
    "BrowserError",
    "BrowserGoneError",
    "BrowserLaunchError",
    "ChromiumNotFound",
    "ContractError",
    "Denied",
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
    "NavigationBlocked",
    "NavigationError",
    "PageChanged",
    "ProfileHeld",
    "ProfileInUse",
    "ProfileLeaseLost",
    "RateLimited",
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
    "TooManyPendingRequests",
    "TransientFailure",
    "UnknownKey",
    "UnsavedChanges",
    "UsageError",
    "WriteOutcomeUnknown",
]
