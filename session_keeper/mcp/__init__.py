"""An MCP server over a :class:`~session_keeper.SessionKeeper` (extra ``mcp``).

``session-keeper mcp --profile DIR`` serves it on stdio; ``--http HOST:PORT --tokens
FILE`` at ``http://HOST:PORT/mcp``, where every client sends ``Authorization: Bearer
<token>`` (``session-keeper mcp token add`` issues one; :class:`TokenFile` is that
file). :class:`KeeperMCP` embeds it in an application that wants to approve access
requests itself or share its keeper.
"""

from session_keeper._util.extras import needs_extra

# Without the extra: MissingExtra (a ModuleNotFoundError) naming the pip install.
with needs_extra("mcp", "session_keeper.mcp"):
    from session_keeper.mcp._catalog import TOOLS
    from session_keeper.mcp._serve import door_policy, http_app, serve_http, serve_stdio
    from session_keeper.mcp._server import (
        CONVERSATION_HEADER,
        CONVERSATION_META,
        TURN_META,
        KeeperMCP,
    )
    from session_keeper.mcp._tokens import McpClient, TokenFile

TOOL_NAMES = tuple(t.name for t in TOOLS)

__all__ = [
    "CONVERSATION_HEADER",
    "CONVERSATION_META",
    "TOOL_NAMES",
    "TURN_META",
    "KeeperMCP",
    "McpClient",
    "TokenFile",
    "door_policy",
    "http_app",
    "serve_http",
    "serve_stdio",
]
