"""A web console for the people behind the agents: see the browser, approve, sign in.

Mount it in the process that runs the keeper (the browser and its cookies live there)::

    from session_keeper.console import Console

    async with Console(keeper, loop=jobloop, bind="127.0.0.1:8765") as console:
        print("open", console.login_link())   # one-time link; sets a session cookie
        ...                                   # the application keeps running

Pages: browsers and generations, conversations with their tab's URL and age, the
login ledger and grants, borrow requests (approve/deny with uses and expiry), jobs
waiting for a person (resume/cancel, and a live view to sign in), recent events.

Other processes: a worker's keeper is visible to a console only through what it saved
in the Store (its generations, ledger, grants, tab URLs, borrow requests; every job and
event). Those rows are read-only here; the live view, approvals and the sign-in
hand-off need the keeper object, so mount a console in each worker that should offer
them. ``session-keeper console --store URL`` runs a read-only console over a store.

Security: loopback only unless ``allow_remote=True``; a one-time link or the bearer
token (``console.auth.token``); CSRF tokens on every form; a live view opens only from
a link signed for its conversation; takeovers and approvals go to the audit chain
(pass the keeper an ``AuditLog``).
"""

from session_keeper._util.extras import needs_extra

# Without the extra: MissingExtra (a ModuleNotFoundError) naming the pip install.
with needs_extra("console", "session_keeper.console"):
    from session_keeper.console._app import Console

__all__ = ["Console"]
