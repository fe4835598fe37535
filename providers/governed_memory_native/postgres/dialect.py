"""What the PostgreSQL repositories (:mod:`postgres.statements`) need of their
transaction beyond the shared SQL dialect. They are typed against this protocol, so the
transaction, which builds them, is the one module that knows both."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
from psycopg import AsyncConnection

from governed_memory_native.sql.dialect import Params, SqlDialect


@attrs.frozen(slots=True)
class Outcome:
    """What one statement of a round trip returned."""

    rows: list[Any]
    rowcount: int


class PostgresDialect(SqlDialect, Protocol):
    queued_cas: bool
    """The schema has ``compare_and_set_applied`` (v12): a compare-and-set of a record
    read in this transaction may be queued."""

    @property
    def connection(self) -> AsyncConnection[Any]:
        """The transaction's connection, for a COPY (after :meth:`flush`)."""
        ...

    async def serialized(self) -> None:
        """Take the tenant's writer lock now if this transaction has one to take."""
        ...

    async def flush(self) -> None:
        """Send what is queued (before a COPY, which cannot share a query)."""
        ...

    async def round_trip(self, statements: Sequence[tuple[str, Params]], *,
                         lock_free: bool = False) -> list[Outcome]:
        """The queued statements and ``statements`` in one round trip; each one's
        outcome."""
        ...
