"""What the SQLite repositories (:mod:`sqlite.statements`) need of their transaction
beyond the shared SQL dialect. They are typed against this protocol, so the
transaction, which builds them, is the one module that knows both."""

from __future__ import annotations

from typing import Any, Protocol

from governed_memory_native.sql.dialect import Params, SqlDialect
from governed_memory_native.sqlite.lexical import LexicalWrites, Statements


class SqliteDialect(SqlDialect, Statements, Protocol):
    lexical: LexicalWrites
    """The scope-local lexical index's writes (postings, the delta, tombstones)."""
    erased_any: bool
    """Set by an erasure: the transaction then overwrites freed pages on commit."""

    async def insert_row(self, sql: str, params: Params) -> int:
        """Run an INSERT; returns the new row's rowid."""
        ...

    async def returning(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        """Run a write with ``RETURNING``; the rows it returned."""
        ...
