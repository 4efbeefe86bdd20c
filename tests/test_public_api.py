"""The public surface is exactly what we meant to publish."""

from __future__ import annotations

import inspect

import session_keeper
import session_keeper.testing

PUBLIC = {
    "KeeperPool",
    "PinnedRouting",
    "PoolJobLoop",
    "PoolStats",
    "ProfileHeld",
    "ProfileLease",
    "ProfileLeaseLost",
    "RoutingPolicy",
    "SiteRouting",
    "SpreadRouting",
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
    "GuardPending",
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


def test_all_names_resolve_and_nothing_private_leaks() -> None:
    """Every name in __all__ exists, none is private, and every public module name is listed."""
    for module in (session_keeper, session_keeper.testing):
        for name in module.__all__:
            assert hasattr(module, name), name
            assert not name.startswith("_"), name
        public = {
            n
            for n, v in vars(module).items()
            if not n.startswith("_") and not inspect.ismodule(v) and n != "annotations"
        }
        assert public == set(module.__all__), public ^ set(module.__all__)


def test_the_public_surface_is_exactly_what_we_publish() -> None:
    """Adding or removing a public name is a deliberate change to this list."""
    assert set(session_keeper.__all__) == PUBLIC
    assert set(session_keeper.testing.__all__) == TESTING


def test_fakes_ship_in_the_testing_package() -> None:
    """FakeBackend and FakeClock ship in session_keeper.testing, not the top level."""
    assert {"FakeBackend", "FakeClock"} <= set(session_keeper.testing.__all__)
    assert "FakeBackend" not in session_keeper.__all__


def test_every_error_derives_from_the_one_base() -> None:
    """All published exceptions share SessionKeeperError as their root."""
    for name in session_keeper.__all__:
        obj = getattr(session_keeper, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            assert issubclass(obj, session_keeper.SessionKeeperError), name


def test_facts_are_frozen_and_keyword_only() -> None:
    """Facts that cross the boundary are frozen attrs classes with keyword-only fields."""
    import attrs

    for cls in (
        session_keeper.TurnFacts,
        session_keeper.Lost,
        session_keeper.Decision,
        session_keeper.SweepReport,
        session_keeper.LoginRecord,
        session_keeper.BrowserLost,
    ):
        assert attrs.has(cls)
        assert all(a.kw_only for a in attrs.fields(cls)), cls
        assert cls.__setattr__ is not object.__setattr__, cls  # frozen
