"""The Guard link: which Guard watches a keeper and how a refused navigation is told
(entry: ``navigation_guard.py``), and the log of every refusal (``block_log.py``).
"""
