"""Browsers: the backend protocol, Playwright on a persistent profile, CDP to a browser we
did not launch, Chromium discovery. Public names are re-exported by
:mod:`session_keeper.seams`.
"""
