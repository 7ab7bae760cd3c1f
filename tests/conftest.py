"""Make the package importable from a plain checkout too (the editable install also does)."""

from __future__ import annotations

import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parent.parent / "server"
if str(SERVER) not in sys.path:
    sys.path.insert(0, str(SERVER))
