"""Secrets and enforcement: the keyring, the audit chain, the login vault and the network
Guard's records.
"""

from session_keeper._guard.guard import Guard
from session_keeper._guard.policy import GuardPolicy
from session_keeper._leaf.blocks import BlockRecord
from session_keeper._model.verdict import GuardVerdict
from session_keeper._security.audit import AuditLog, verify_audit
from session_keeper._security.keyring import Keyring
from session_keeper._security.vault import LoginVault, RestoredLogin

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
