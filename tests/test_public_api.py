"""The public surface is exactly what we meant to publish."""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from types import ModuleType

import pytest

import session_keeper
import session_keeper.testing
from session_keeper import facts
from session_keeper.errors import SessionKeeperError

# The top level: what a user of the keeper needs on a first read (at most 25 names).
PUBLIC = {
    "CdpBackend",
    "ConversationTab",
    "Durability",
    "FormField",
    "FormRecipe",
    "FormStep",
    "Grant",
    "Guard",
    "IdleTimeouts",
    "LoginProbe",
    "LoginSettings",
    "PageSign",
    "PlaywrightBackend",
    "RenewalPolicy",
    "Replay",
    "ReplayRecorder",
    "RestartPolicy",
    "ScriptRecipe",
    "SessionKeeper",
    "SignInAnswer",
    "Sweeper",
    "TabLocator",
    "Telemetry",
    "find_chromium",
}

# Everything else lives in a namespace named after what it is for.
NAMESPACES: dict[str, set[str]] = {
    "integrations.temporal": {
        "CLAIM_ACTIVITY",
        "DENIED",
        "REFUSED",
        "LOGIN_REQUIRED",
        "PROFILE_HELD",
        "SIGN_IN_QUERY",
        "SIGN_IN_SIGNAL",
        "WRITE_OUTCOME_UNKNOWN",
        "BrowserStep",
        "BrowserStepDef",
        "BrowserSteps",
        "BrowserWorker",
        "StepRequest",
        "StepResult",
        "WorkflowBrowser",
        "idempotency_key",
    },
    "integrations.dbos": {
        "NOT_RETRIED",
        "SIGN_IN_EVENT",
        "SIGN_IN_TOPIC",
        "BrowserStep",
        "BrowserStepDef",
        "BrowserSteps",
        "BrowserWorker",
        "SignInNeeded",
        "SignInWaits",
        "StepRequest",
        "StepResult",
        "WorkflowBrowser",
        "idempotency_key",
        "retryable",
        "send_sign_in",
        "sign_in_topic",
        "waiting_for_sign_in",
    },
    "pool": {
        "KeeperPool",
        "PinnedRouting",
        "PoolStats",
        "RoutingPolicy",
        "SiteRouting",
        "SpreadRouting",
    },
    "facts": {
        "BorrowRequest",
        "BrowserLost",
        "ClosedBrowser",
        "ClosedTab",
        "CookieFingerprint",
        "Decision",
        "GenerationRecord",
        "LoginRecord",
        "Lost",
        "PROBE_CONVERSATION",
        "Renewal",
        "ReplayFrame",
        "SignInWindow",
        "SweepReport",
        "TabView",
        "TurnFacts",
    },
    "seams": {
        "BrowserBackend",
        "BrowserSession",
        "Clock",
        "CloseCause",
        "Cookie",
        "SystemClock",
    },
    "security": {
        "AuditLog",
        "BlockRecord",
        "CredentialSource",
        "Credentials",
        "EnvCredentials",
        "GuardPolicy",
        "GuardVerdict",
        "Keyring",
        "LoginVault",
        "OsKeyringCredentials",
        "RestoredLogin",
        "SealedCredentials",
        "Secret",
        "TotpAlgorithm",
        "TotpSecret",
        "open_storage_state",
        "totp_code",
        "verify_audit",
    },
    "stores": {
        "Event",
        "EventKind",
        "EventStore",
        "JobStore",
        "KeeperRows",
        "KeeperStateStore",
        "PostgresStore",
        "ProfileLease",
        "ProfileLeaseStore",
        "Pruned",
        "RetentionStore",
        "SqliteStore",
        "Store",
        "StoreLifetime",
        "StoreProblem",
        "event_meaning",
        "open_failure",
        "sqlite_path",
        "sqlite_problem",
        "store_from_url",
        "url_problem",
    },
    "jobs": {
        "Accepted",
        "ArtifactRef",
        "Checkpoint",
        "CommitResult",
        "ExternalWrite",
        "HumanPause",
        "Job",
        "JobContract",
        "JobLoop",
        "JobMetrics",
        "PoolJobLoop",
        "JobState",
        "Lease",
        "PageArtifact",
        "Readback",
        "ResultRecord",
        "RunOutcome",
        "Step",
        "StepContext",
        "StoredResult",
        "WriteStatus",
        "summarize",
    },
    "errors": {
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
    },
}

# Every name published before the surface was reshaped (issue 10): each must still be
# importable from some namespace, so the reshaping dropped nothing.
PUBLISHED_BEFORE_THE_RESHAPING = {
    "PROBE_CONVERSATION",
    "Accepted",
    "ArtifactNotFound",
    "ArtifactRef",
    "AuditLog",
    "AuditTampered",
    "BlockRecord",
    "BorrowRequest",
    "BrowserBackend",
    "BrowserError",
    "BrowserGoneError",
    "BrowserLaunchError",
    "BrowserLost",
    "BrowserSession",
    "CdpBackend",
    "Checkpoint",
    "ChromiumNotFound",
    "Clock",
    "CloseCause",
    "ClosedBrowser",
    "ClosedTab",
    "CommitResult",
    "ContractError",
    "ConversationTab",
    "Cookie",
    "CookieFingerprint",
    "Decision",
    "Denied",
    "Event",
    "ExternalWrite",
    "GenerationRecord",
    "Grant",
    "Guard",
    "GuardPolicy",
    "GuardUnsupported",
    "GuardVerdict",
    "HumanPause",
    "IntegrityError",
    "InvalidArgument",
    "InvalidArgumentType",
    "InvalidTransition",
    "Job",
    "JobContract",
    "JobLoop",
    "JobMetrics",
    "JobNotFound",
    "JobState",
    "KeeperClosedError",
    "Keyring",
    "KeyringError",
    "Lease",
    "LeaseHeldError",
    "LoginAccountMismatch",
    "LoginNotObserved",
    "LoginNotYours",
    "LoginProbeFailed",
    "LoginProbe",
    "LoginRecord",
    "LoginRequired",
    "LoginStillMissing",
    "LoginVault",
    "Lost",
    "NavigationBlocked",
    "NavigationError",
    "PageChanged",
    "PlaywrightBackend",
    "PostgresStore",
    "ProfileInUse",
    "RateLimited",
    "Readback",
    "RestartPolicy",
    "RestoredLogin",
    "ResultRecord",
    "RunOutcome",
    "SchemaVersionError",
    "SealBroken",
    "SessionKeeper",
    "SessionKeeperError",
    "SignedOut",
    "SqliteStore",
    "StaleLeaseError",
    "Step",
    "StepContext",
    "StepFailure",
    "Store",
    "StoreBusy",
    "StoreCorrupt",
    "StoreError",
    "UnsavedChanges",
    "StoredResult",
    "SweepReport",
    "Sweeper",
    "SystemClock",
    "TabLocator",
    "TransientFailure",
    "TabView",
    "TurnFacts",
    "UnknownKey",
    "UsageError",
    "WriteOutcomeUnknown",
    "WriteStatus",
    "find_chromium",
    "summarize",
    "verify_audit",
}

TESTING = {
    "CHROMIUM_TEST_ARGS",
    "FakeBackend",
    "FakeClock",
    "FakePage",
    "FakeSession",
    "JobFaultPoint",
    "LocalSites",
    "RecordedRequest",
    "SiteResponse",
    "StoreOperation",
    "StoreStatement",
    "TemporaryPostgres",
    "TemporaryPostgresError",
    # Store testing mode (instead of constructor hooks).
    "occupy_store_thread",
    "run_store_operation",
    "watch_store_statements",
    # Keeper testing mode.
    "drain_keeper_writes",
    "held_tab_locks",
    # Job loop testing mode (instead of constructor hooks).
    "job_loop_testing",
    "allow_third_party_cookies",
}


def _namespace(name: str) -> ModuleType:
    return importlib.import_module(f"session_keeper.{name}")


def _published_modules() -> list[ModuleType]:
    return [session_keeper, session_keeper.testing, *map(_namespace, NAMESPACES)]


def test_all_names_resolve_and_nothing_private_leaks() -> None:
    """Every name in each public module's __all__ exists, none is private, none is unlisted."""
    for module in _published_modules():
        for name in module.__all__:
            assert hasattr(module, name), (module.__name__, name)
            assert not name.startswith("_"), (module.__name__, name)
        public = {
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and not inspect.ismodule(v) and n != "annotations"
        }
        assert public == set(module.__all__), (module.__name__, public ^ set(module.__all__))


def test_the_public_surface_is_exactly_what_we_publish() -> None:
    """Adding or removing a public name, anywhere, is a deliberate change to these lists."""
    assert set(session_keeper.__all__) == PUBLIC
    for name, members in NAMESPACES.items():
        assert set(_namespace(name).__all__) == members, name
    assert set(session_keeper.testing.__all__) == TESTING


def test_the_top_level_stays_lean() -> None:
    """The top level holds at most 25 names; the rest live in named namespaces."""
    assert len(session_keeper.__all__) <= 25


def test_the_reshaping_dropped_no_published_name() -> None:
    """Every name published before the namespaces still imports from one of them."""
    reachable = set(session_keeper.__all__).union(*NAMESPACES.values())
    assert reachable >= PUBLISHED_BEFORE_THE_RESHAPING, PUBLISHED_BEFORE_THE_RESHAPING - reachable


#: Sibling namespaces: the same API on two engines, so one name (``BrowserSteps``,
#: ``WorkflowBrowser``...) names the same concept in each of them.
SIBLINGS = {"session_keeper.integrations.temporal", "session_keeper.integrations.dbos"}


def test_each_public_name_is_published_in_one_namespace() -> None:
    """A public name has one home, chosen by purpose: no name is in two ``__all__`` (but
    the engine integrations, siblings that share their vocabulary)."""
    homes: dict[str, str] = {}
    for module in _published_modules():
        for name in module.__all__:
            home = homes.setdefault(name, module.__name__)
            if {home, module.__name__} <= SIBLINGS:
                continue
            assert home == module.__name__, (name, home, module.__name__)


#: Where a name was published before it got one home (issue 21): old path -> new home.
#: The old paths are gone (issue 46): a 0.x with no published release carries no shims.
MOVED = {
    **{
        ("session_keeper", n): "session_keeper.errors"
        for n in (
            "BrowserError",
            "BrowserGoneError",
            "LoginNotObserved",
            "NavigationBlocked",
            "SessionKeeperError",
            "UsageError",
        )
    },
    **{
        ("session_keeper", n): "session_keeper.facts"
        for n in (
            "BorrowRequest",
            "BrowserLost",
            "Decision",
            "LoginRecord",
            "Lost",
            "SweepReport",
            "TurnFacts",
        )
    },
    ("session_keeper", "SqliteStore"): "session_keeper.stores",
    **{
        ("session_keeper.facts", n): "session_keeper"
        for n in (
            "ConversationTab",
            "Grant",
            "LoginProbe",
            "RestartPolicy",
            "Sweeper",
            "TabLocator",
        )
    },
    **{
        ("session_keeper.seams", n): "session_keeper"
        for n in ("CdpBackend", "PlaywrightBackend", "find_chromium")
    },
    ("session_keeper.seams", "Store"): "session_keeper.stores",
    ("session_keeper.security", "Guard"): "session_keeper",
}


@pytest.mark.parametrize(("old", "name"), sorted(MOVED))
def test_a_moved_name_lives_only_in_its_new_home(old: str, name: str) -> None:
    """A name that moved (0.x, never released on its old path) is published by its new
    home alone: its old path is an AttributeError, with no shim and no warning."""
    new = MOVED[(old, name)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert name in importlib.import_module(new).__all__
        assert getattr(importlib.import_module(new), name) is not None
        assert name not in importlib.import_module(old).__all__
        with pytest.raises(AttributeError, match=name):
            getattr(importlib.import_module(old), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    """No namespace answers a name it does not publish."""
    name = "no_such_name"
    with pytest.raises(AttributeError, match=name):
        getattr(session_keeper, name)


def test_the_errors_namespace_holds_every_exception_we_raise() -> None:
    """Each exception defined in the one tree is published in session_keeper.errors."""
    from session_keeper import errors as _errors

    defined = {
        n
        for n, v in vars(_errors).items()
        if inspect.isclass(v) and issubclass(v, BaseException) and v.__module__ == _errors.__name__
    }
    assert defined - {n for n in defined if n.startswith("_")} == NAMESPACES["errors"]


def test_fakes_ship_in_the_testing_package() -> None:
    """FakeBackend and FakeClock ship in session_keeper.testing, not the top level."""
    assert {"FakeBackend", "FakeClock"} <= set(session_keeper.testing.__all__)
    assert "FakeBackend" not in session_keeper.__all__


def test_every_error_derives_from_the_one_base() -> None:
    """All published exceptions share SessionKeeperError as their root."""
    for module in _published_modules():
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                assert issubclass(obj, SessionKeeperError), name


def test_facts_are_frozen_and_keyword_only() -> None:
    """Facts that cross the boundary are frozen attrs classes with keyword-only fields."""
    import attrs

    for cls in (
        facts.TurnFacts,
        facts.Lost,
        facts.Decision,
        facts.SweepReport,
        facts.LoginRecord,
        facts.ReplayFrame,
        facts.BrowserLost,
        facts.SignInWindow,
    ):
        assert attrs.has(cls)
        assert all(a.kw_only for a in attrs.fields(cls)), cls
        assert cls.__setattr__ is not object.__setattr__, cls  # frozen


def _docstring_tree() -> dict[str, str | None]:
    """Each exception named in ``session_keeper.errors``' docstring tree -> its parent there."""
    from session_keeper import errors as _errors

    assert _errors.__doc__ is not None
    block = _errors.__doc__.split("::", 1)[1].split("\n\n")[1]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = re.match(r"^([\s│├└─]*)(\w+)", line)
        assert match is not None, line
        depth, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert name not in parents, f"{name} is in the tree twice"
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def test_the_errors_docstring_tree_is_the_class_tree() -> None:
    """Every published exception sits in errors.py's docstring tree under its first base."""
    from session_keeper import errors as _errors

    tree = _docstring_tree()
    assert set(tree) == set(_errors.__all__)
    for name, parent in tree.items():
        first = getattr(_errors, name).__bases__[0]
        assert (first.__name__ if parent is not None else None) == parent, name


def test_a_blocked_navigation_is_a_refusal_never_a_browser_error() -> None:
    """NavigationBlocked is a PolicyRefusal (policy answered) and nothing else: ``except
    BrowserError`` (a breakage, retried by the job loop) never catches it."""
    from session_keeper.errors import BrowserError, NavigationBlocked, PolicyRefusal

    assert NavigationBlocked.__bases__ == (PolicyRefusal,)
    assert not issubclass(NavigationBlocked, BrowserError)
    assert not issubclass(PolicyRefusal, BrowserError)
