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
import time
from pathlib import Path
from typing import Any

import pytest

POSTGRES_DSN = os.environ.get(
    "GOVERNED_MEMORY_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
RUN_PREFIX = f"gmt_{int(time.time()):08x}_{secrets.token_hex(3)}_"
"""Every schema this test process creates starts with this (its start time in hex, so
schemas a killed run left behind can be recognised as stale by a later one)."""
STALE_AFTER_S = 6 * 3600

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


def advisory_locks(key: int) -> list[tuple[str, bool]]:
    """``(mode, granted)`` of every advisory lock on the bigint ``key`` in this database,
    held or waited for, by any session: ``pg_locks`` splits the key into two 32-bit
    halves (``classid``, ``objid``) and marks a bigint key with ``objsubid = 1``."""
    import psycopg

    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT mode, granted FROM pg_locks WHERE locktype = 'advisory'"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1"
            " ORDER BY mode, granted DESC",
            (unsigned >> 32, unsigned & 0xFFFF_FFFF)).fetchall()
    return [(str(mode), bool(granted)) for mode, granted in rows]


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


def drop_stale_schemas(max_age_s: float = STALE_AFTER_S) -> int:
    """Drop schemas of test runs that started more than ``max_age_s`` ago (a run killed
    before its own cleanup); never those of a run that may still be going."""
    if postgres_unavailable_reason() is not None:
        return 0
    import psycopg

    dropped = 0
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        names = [row[0] for row in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname ~ %s",
            (r"^gmt_[0-9a-f]{8}_[0-9a-f]{6}_[0-9a-f]{16}$",))]
        for name in names:
            started = int(name[4:12], 16)
            if time.time() - started > max_age_s:
                conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psycopg.sql.Identifier(name)))
                dropped += 1
    return dropped
