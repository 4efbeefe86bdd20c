"""Secrets and enforcement: the keyring, the audit chain, the login vault and the network
Guard's records.
"""

from session_keeper._audit import AuditLog, verify_audit
from session_keeper._guard_blocks import BlockRecord
from session_keeper._guard_playwright import Guard
from session_keeper._guard_policy import GuardPolicy, GuardVerdict
from session_keeper._secrets import Keyring
from session_keeper._vault import LoginVault, RestoredLogin

__all__ = [
    "AuditLog",
    "BlockRecord",
    "Guard",
    "GuardPolicy",
    "GuardVerdict",
    "Keyring",
    "LoginVault",
    "RestoredLogin",
    "verify_audit",
]
