"""What the shared SQL repositories need of a dialect's transaction.

SQLite and PostgreSQL speak one SQL for almost every statement the port needs (``ON
CONFLICT``, ``excluded``, ``RETURNING``, ``LIMIT``), so the ``sql_*`` modules hold one
statement set, written with ``?`` placeholders, and a fix to a read or a write cannot
miss one of the backends. What really differs between the two is small and lives behind
this protocol: the placeholder, how a set of values is bound (``IN (?, ?)`` against a
bound array), how free text is stored, how a statement travels (PostgreSQL queues
statements whose result nobody reads and sends them with the next round trip; SQLite
just runs them), and how rows come back. Where a dialect's SQL genuinely differs (lexical
postings, locking, upserts over column types of its own), its repository subclass
overrides that one method (:mod:`sqlite.statements`, :mod:`postgres.statements`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from governed_memory.records import MemoryRecord

T = TypeVar("T")
Params = Sequence[Any] | Mapping[str, Any]


class SqlDialect(Protocol):
    """One open transaction, as the shared statements drive it. SQL handed to the
    methods is in the dialect's own placeholder: pass shared ``?`` SQL through
    :meth:`q` first."""

    chunk: int
    """Values bound per statement for a set of ids."""
    content_bytes: str
    """SQL for the UTF-8 byte length of ``memory_records.content``."""

    def q(self, sql: str) -> str:
        """``sql`` written with ``?`` placeholders, in this dialect's."""
        ...

    def member(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``, as SQL (with ``?``) and its parameters."""
        ...

    def text(self, value: str | None) -> Any:
        """Free-form text as its columns store it (``record_key``, ``operation_id``...)."""
        ...

    def untext(self, value: Any) -> str | None: ...

    def record_from_row(self, row: Any) -> MemoryRecord:
        """A ``memory_records`` row read with ``SELECT_RECORD`` through :meth:`rows`."""
        ...

    async def rows(self, sql: str, params: Params = (), *,
                   lock_free: bool = False) -> list[Any]:
        """Rows addressable by column name. ``lock_free``: the statement is safe without
        the writer lock (appends and deletions by id that row locks alone protect)."""
        ...

    async def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Rows as plain tuples, of a read or of a write with ``RETURNING``."""
        ...

    async def write(self, sql: str, params: Params = (), *,
                    lock_free: bool = False) -> int:
        """Run a write now; how many rows it changed."""
        ...

    async def queue(self, sql: str, params: Params = (), *,
                    lock_free: bool = False) -> None:
        """A write whose count nobody reads: it may travel with the next statement that
        must be sent anyway (and its error surface there, failing the unit)."""
        ...

    async def write_many(self, statements: Sequence[tuple[str, Params]], *,
                         lock_free: bool = False) -> list[int]:
        """Run writes in order, in as few round trips as the dialect can; each one's
        count."""
        ...

    async def vector_pairs(self, sql: str, params: Params) -> list[tuple[str, bytes]]:
        """``(record id, vector)`` rows of ``sql``, vectors as raw bytes."""
        ...


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def unique(items: Iterable[T]) -> list[T]:
    """``items`` without repeats, in their first order."""
    return list(dict.fromkeys(items))
