"""Small tools every layer may use: validation, redaction, the clock, a keyed lock, binds,
and the process's own surfaces.
"""
