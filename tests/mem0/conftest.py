"""mem0 offline for every test here: telemetry off and its directory ours, set before
any module imports mem0 (it reads both at import time). The import goes through the
adapter, which loads the mem0ai package even when a plain ``mem0.py`` (bench/mem0.py,
put on ``sys.path`` by another test module) comes first on the path; tests that use raw
mem0 then get the real package whatever order they run in."""

from __future__ import annotations

import os
import tempfile

os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="governed-memory-mem0-"))

from governed_memory_mem0.offline import import_mem0

import_mem0(None)
