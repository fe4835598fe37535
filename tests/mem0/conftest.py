"""mem0 offline for every test here: telemetry off and its directory ours, set before
any module imports mem0 (it reads both at import time)."""

from __future__ import annotations

import os
import tempfile

os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="governed-memory-mem0-"))
