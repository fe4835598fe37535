"""PostgreSQL for tests: a gate that skips (or fails under CI=true) when the server is
absent, and a private schema per test so tests are independent and can run in parallel.

A schema name is derived from a directory (a test's ``tmp_path``), so two providers built
for one directory share one database, just as two SQLite providers share one file; the
run-unique prefix keeps parallel runs (and xdist workers) apart, and :func:`drop_schemas`
removes everything the run created.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

import pytest

POSTGRES_DSN = os.environ.get(
    "GOVERNED_MEMORY_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
RUN_PREFIX = f"gmt_{secrets.token_hex(4)}_"
"""Every schema this test process creates starts with this."""

_state: dict[str, str | None] = {}


def postgres_unavailable_reason() -> str | None:
    """None when PostgreSQL answers at ``GOVERNED_MEMORY_POSTGRES_DSN``, else why not."""
    if "reason" not in _state:
        try:
            import psycopg

            with psycopg.connect(POSTGRES_DSN, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            _state["reason"] = None
        except ImportError:
            _state["reason"] = ("the psycopg package is not installed "
                                "(pip install 'governed-memory[postgres]')")
        except Exception as exc:
            _state["reason"] = f"PostgreSQL is not reachable at GOVERNED_MEMORY_POSTGRES_DSN: {exc}"
    return _state["reason"]


def require_postgres() -> None:
    """Skip with the reason, or fail when ``CI=true``: CI must never skip silently."""
    reason = postgres_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def require_postgres_package() -> None:
    """For modules that import psycopg or the PostgreSQL backend: skip the module without
    the ``postgres`` extra, or fail it when ``CI=true``."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        reason = "psycopg is not installed (pip install 'governed-memory[postgres]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def schema_for(directory: Path) -> str:
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    return RUN_PREFIX + digest


def postgres_config(directory: Path, **extra: Any) -> dict[str, Any]:
    """A native provider config on a schema private to ``directory``; skips (or fails
    under CI) when PostgreSQL is absent."""
    require_postgres()
    return {"backend": "postgres", "dsn": POSTGRES_DSN, "schema": schema_for(directory),
            "pool_max_size": 4, **extra}


def drop_schemas(prefix: str = RUN_PREFIX) -> int:
    """Drop every schema whose name starts with ``prefix``; each in its own transaction,
    so thousands of them never exhaust the server's lock table."""
    if postgres_unavailable_reason() is not None:
        return 0
    import psycopg

    pattern = prefix.replace("_", r"\_") + "%"
    dropped = 0
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        names = [row[0] for row in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (pattern,))]
        for name in names:
            conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                psycopg.sql.Identifier(name)))
            dropped += 1
    return dropped
