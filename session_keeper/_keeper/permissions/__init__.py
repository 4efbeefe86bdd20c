"""Permissions: the one query in three modes (entry: ``keeper_permissions.py``), and the
changes to who may use which login: grants, revokes, borrow requests, takeovers
(``granting.py``).
"""
