"""The engine: the SessionKeeper facade, its parts (browser lifetime, tabs, restarts,
logins, conversations, grants, persistence, sweeps) and the conversation handle; the one
home of its mutable state.
"""
