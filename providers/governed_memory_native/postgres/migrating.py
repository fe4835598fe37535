"""Bringing a PostgreSQL schema up to date on start, safely with many processes at once.

Migrations run in one transaction that first takes the schema's lock exclusively (a
transaction-scoped advisory lock keyed by :func:`locks.writer_lock_key`): several
processes starting at once on a fresh database queue behind each other, the first
creates everything and the others find it done. Every writer takes the same key too (see
:mod:`postgres.locks`), so a schema change never interleaves with a write of a process
still running older code. A schema newer than this code knows is refused rather than
written with stale assumptions. What the migrations are is :mod:`postgres.schema`'s
(whose :func:`~postgres.schema.migrate` hands its list to :func:`apply_migrations`);
this module is how they are applied and recorded.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final

from psycopg import AsyncConnection, sql

from governed_memory_native.postgres.locks import writer_lock_key
from governed_memory_native.postgres.reindex import rebuild_lexical_index
from governed_memory_native.storage.migrations import Migration, pending

MIGRATIONS_TABLE: Final = "governed_memory_migrations"


async def current_version(conn: AsyncConnection[dict[str, Any]]) -> int:
    """The applied schema version; 0 when the migrations table does not exist yet."""
    cursor = await conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AS present", (MIGRATIONS_TABLE,)
    )
    row = await cursor.fetchone()
    if row is None or not row["present"]:
        return 0
    cursor = await conn.execute(
        f"SELECT coalesce(max(version), 0) AS version FROM {MIGRATIONS_TABLE}"
    )
    row = await cursor.fetchone()
    return int(row["version"]) if row is not None else 0


async def apply_migrations(conn: AsyncConnection[dict[str, Any]], schema: str,
                           applied_at: float, migrations: Sequence[Migration],
                           rebuilds: Collection[int]) -> int:
    """Create ``schema`` if needed and apply the ``migrations`` it lacks, all in one
    transaction: a failure leaves the database as it was. After the statements of a
    version in ``rebuilds``, the lexical index is rebuilt from the records with the
    current analyzer (:mod:`postgres.reindex`), in the same transaction. Returns the
    version the schema is at (the last of ``migrations``)."""
    async with conn.transaction():
        # Wait as long as the migrator before us needs: a pool connection's lock_timeout
        # bounds writers' waits, not start-up's.
        await conn.execute("SET LOCAL lock_timeout = 0")
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (writer_lock_key(schema),))
        cursor = await conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
        )
        if await cursor.fetchone() is None:
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        await conn.execute(
            sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema))
        )
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
            " version integer PRIMARY KEY, description text NOT NULL,"
            " applied_at double precision NOT NULL)"
        )
        version = await current_version(conn)
        for migration in pending(migrations, version, "schema"):
            for statement in migration.statements:
                await conn.execute(statement)
            if migration.version in rebuilds:
                await rebuild_lexical_index(conn)
            await conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (version, description, applied_at)"
                " VALUES (%s, %s, %s)",
                (migration.version, migration.description, applied_at),
            )
            version = migration.version
    return version
