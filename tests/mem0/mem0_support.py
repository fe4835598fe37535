"""Shared helpers for the Mem0 tests: configs for both clients and the wire server.

mem0 must be imported with telemetry off; ``conftest.py`` sets the environment before
any test module imports it, and the adapter refuses a mem0 imported otherwise.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any, Final

from wire_server import WireServer

API_KEY_ENV: Final = "GOVERNED_MEMORY_TEST_MEM0_KEY"
API_KEY: Final = "m0-test-secret-key-0123456789"

_server: WireServer | None = None
_prefixes = itertools.count(1)


def wire_server() -> WireServer:
    """One wire server per test process; providers stay apart by namespace prefix."""
    global _server
    if _server is None:
        os.environ[API_KEY_ENV] = API_KEY
        _server = WireServer(API_KEY)
    return _server


def local_config(directory: Path, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "client": "local",
        "ledger_path": str(directory / "ledger.db"),
        "vector_store": {"provider": "faiss", "path": str(directory / "faiss")},
        "history_db_path": str(directory / "mem0-history.db"),
        "embedder": {"name": "deterministic", "dimension": 64},
    }
    config.update(overrides)
    return config


def platform_config(server: WireServer, directory: Path, **overrides: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "client": "platform",
        "host": server.url,
        "api_key_env": API_KEY_ENV,
        "ledger_path": str(directory / "ledger.db"),
        "namespace_prefix": f"t{next(_prefixes)}-{os.getpid()}",
        "timeout_seconds": 10.0,
    }
    config.update(overrides)
    return config
