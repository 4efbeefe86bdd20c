"""Secrets and enforcement: the keyring, the audit chain, the login vault, the network
Guard's records, and the credentials sign-in recipes type (sources, sealed vault, TOTP).
"""

from session_keeper._guard.policy import GuardPolicy
from session_keeper._keeper.logins.recipes import Credentials
from session_keeper._keeper.logins.storage_state_io import open_storage_state
from session_keeper._leaf.blocks import BlockRecord
from session_keeper._model.verdict import GuardVerdict
from session_keeper._security.audit import AuditLog, verify_audit
from session_keeper._security.credentials import (
    CredentialSource,
    EnvCredentials,
    OsKeyringCredentials,
    SealedCredentials,
    Secret,
    TotpAlgorithm,
    TotpSecret,
    totp_code,
)
from session_keeper._security.keyring import Keyring
from session_keeper._security.vault import LoginVault, RestoredLogin

__all__ = [
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
]
