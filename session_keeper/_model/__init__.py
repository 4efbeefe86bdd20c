"""Pure values and rules, no I/O: facts, grants, the ledger, uses, authorisation, borrows,
fingerprints, login evidence, origins, the web rule.
"""
