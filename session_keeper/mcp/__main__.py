"""``python -m session_keeper.mcp`` is ``session-keeper mcp``."""

import sys

from session_keeper.mcp._serve import main

sys.exit(main())
