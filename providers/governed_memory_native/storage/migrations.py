"""What a schema migration is, and which ones a database still needs, for both SQL
backends.

SQLite and PostgreSQL differ in how they lock, where they record the applied version and
in every DDL statement, but not in the rule: apply, in order, each migration above the
recorded version, and refuse a database newer than this code rather than write to it
with stale assumptions. The rule lives here once so the two cannot disagree about it.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from governed_memory.errors import MemoryConfigurationError


@attrs.frozen(slots=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


def pending(migrations: Sequence[Migration], version: int, field: str) -> list[Migration]:
    """The migrations to apply to a database at ``version``, oldest first.

    ``field`` names the configuration field that chose the database, for the error.
    """
    latest = migrations[-1].version
    if version > latest:
        raise MemoryConfigurationError(
            f"{field}: the database schema is version {version}, newer than this code "
            f"supports ({latest}); upgrade governed-memory"
        )
    return [migration for migration in migrations if migration.version > version]
