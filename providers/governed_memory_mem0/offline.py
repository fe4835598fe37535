"""Importing ``mem0`` offline: telemetry off and its directory ours, before the import.

mem0 reads ``MEM0_TELEMETRY`` once, at import time (and copies it into
``mem0.memory.main``); left on, every run stalls on the closed network and writes an
extra collection. It also writes ``$MEM0_DIR/config.json`` on import. So both are set
first, and an import that already happened with telemetry on is refused rather than
quietly phoning home.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

from governed_memory.errors import MemoryConfigurationError

_lock = threading.Lock()


def import_mem0(mem0_dir: Path | None) -> ModuleType:
    with _lock:
        if "mem0" not in sys.modules:
            os.environ["MEM0_TELEMETRY"] = "False"
            if mem0_dir is not None and not os.environ.get("MEM0_DIR"):
                mem0_dir.mkdir(parents=True, exist_ok=True)
                os.environ["MEM0_DIR"] = str(mem0_dir)
        try:
            _load_package()
            import mem0  # type: ignore[import-untyped]
            import mem0.memory.main as mem0_main  # type: ignore[import-untyped]
            import mem0.memory.telemetry as mem0_telemetry  # type: ignore[import-untyped]
        except ImportError:
            raise MemoryConfigurationError(
                "the mem0 provider needs the mem0 extra: pip install 'governed-memory[mem0]'"
            ) from None
        if mem0_telemetry.MEM0_TELEMETRY or mem0_main.MEM0_TELEMETRY:
            raise MemoryConfigurationError(
                "mem0 was imported with telemetry on; set MEM0_TELEMETRY=False before "
                "anything imports mem0")
        module: ModuleType = mem0
        return module


def _load_package() -> None:
    """Import the mem0ai *package*, even if a plain ``mem0.py`` comes first on the path
    (a script named after the library, like bench/mem0.py once its folder is on
    ``sys.path``); a non-package already imported under that name is refused."""
    loaded = sys.modules.get("mem0")
    if loaded is not None:
        if not hasattr(loaded, "__path__"):
            raise MemoryConfigurationError(
                "a module named mem0 that is not the mem0ai package was imported first")
        return
    path = [p for p in sys.path if not os.path.isfile(os.path.join(p or ".", "mem0.py"))]
    spec = importlib.machinery.PathFinder.find_spec("mem0", path)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError("mem0")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mem0"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("mem0", None)
        raise
