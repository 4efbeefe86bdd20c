"""Tabs: one page per conversation and where it is (``conversation_pages.py``), the handle
code drives it through (entry: ``conversation_tab.py``, with ``tab_locator.py``), what its
page did (``page_watch.py``), the jar a navigation left (``navigation_baselines.py``),
spans (``spans.py``) and the opt-in replay (``replay.py``).
"""
