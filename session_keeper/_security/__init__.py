"""Secrets: the keyring that seals, the login vault, the audit chain. Public names are
re-exported by :mod:`session_keeper.security`."""
