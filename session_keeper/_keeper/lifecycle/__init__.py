"""The browser's life and the conversations': launch, restart and idle close (entry:
``browser_lifetime.py``), re-binding a browser left running (``rebinding.py``), what a
new browser kept of the old one (``restart_accounting.py``), each conversation told its
news once and ended (``conversations.py``), and sweeps (``sweeper.py``).
"""
