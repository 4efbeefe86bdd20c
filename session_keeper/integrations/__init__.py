"""Adapters for agent frameworks: ``langgraph`` (extra ``langgraph``) and ``sync``.

Each uses only the conversation handle (:class:`~session_keeper.ConversationTab`), never
the raw page, so everything an LLM drives through them is subject to the Guard.
"""
