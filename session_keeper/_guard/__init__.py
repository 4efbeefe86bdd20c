"""The Guard: its policy decides whether a conversation's request may leave the browser, and
the Guard enforces that decision on a Playwright browser's network. Public names are
re-exported by :mod:`session_keeper` and :mod:`session_keeper.security`."""
