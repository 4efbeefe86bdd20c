"""Adapters for agent frameworks and engines: ``langgraph`` (extra ``langgraph``),
``temporal`` (extra ``temporal``), ``dbos`` (extra ``dbos``) and ``sync``.

The LangGraph and sync adapters use only the conversation handle
(:class:`~session_keeper.ConversationTab`), never the raw page, so everything an LLM
drives through them is subject to the Guard. Temporal's and DBOS's browser steps are code you write
(as a ``JobLoop`` step is): they get the raw page (``step.page()``) and the guarded
handle (``step.tab()``) for anything an LLM drives.
"""
