"""Logins: the keeper's logins as its facade offers them (entry: ``keeper_logins.py``),
recording a sign-in on evidence (``login_records.py``), probes (``login_probe.py``),
re-issued cookies (``reissues.py``), logins kept in web storage
(``web_storage_logins.py``), ``storageState`` in and out (``storage_state_io.py``), and
renewal from sign-in recipes (``renewal.py``, ``recipes.py``).
"""
