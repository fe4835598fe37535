"""The module paths this package had before it was arranged in rooms, kept importable.

Until the arrangement in sub-packages (storage, sql, sqlite, postgres, memory, retrieval,
turns), every module sat flat in the package, and platform code and notebooks import
them by those names (``governed_memory_native.sqlite_backend``). A meta-path finder
answers an old name with the module that now holds its code (the same module object, so
``isinstance`` and monkeypatching keep working) and warns once with the new name. New
code imports the new paths; this table is removed one release after the move.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Final

PACKAGE: Final = "governed_memory_native"

MOVED: Final[dict[str, str]] = {
    "port": "storage.port",
    "repositories": "storage.repositories",
    "storage_values": "storage.values",
    "stored_revisions": "storage.revisions",
    "schema_migrations": "storage.migrations",
    "record_copies": "storage.copies",
    "sql_dialect": "sql.dialect",
    "sql_erasure": "sql.erasure",
    "sql_idempotency": "sql.idempotency",
    "sql_jobs": "sql.jobs",
    "sql_outbox": "sql.outbox",
    "sql_records": "sql.records",
    "sql_revisions": "sql.revisions",
    "sql_snapshots": "sql.snapshots",
    "sql_vectors": "sql.vectors",
    "sql_versions": "sql.versions",
    "record_rows": "sql.rows",
    "stored_rows": "sql.rows",
    "sqlite_backend": "sqlite.backend",
    "sqlite_dialect": "sqlite.dialect",
    "sqlite_errors": "sqlite.errors",
    "sqlite_lexical": "sqlite.lexical",
    "sqlite_rows": "sqlite.rows",
    "sqlite_schema": "sqlite.schema",
    "sqlite_setup": "sqlite.connection",
    "sqlite_statements": "sqlite.statements",
    "sqlite_transaction": "sqlite.transaction",
    "rates_sqlite": "sqlite.rates",
    "postgres_backend": "postgres.backend",
    "postgres_dialect": "postgres.dialect",
    "postgres_errors": "postgres.errors",
    "postgres_reindex": "postgres.reindex",
    "postgres_rows": "postgres.rows",
    "postgres_schema": "postgres.schema",
    "postgres_statements": "postgres.statements",
    "postgres_transaction": "postgres.transaction",
    "rates_postgres": "postgres.rates",
    "postgres_trail": "postgres.trail.sink",
    "postgres_trail_reader": "postgres.trail.reader",
    "postgres_trail_schema": "postgres.trail.schema",
    "postgres_trail_sequencer": "postgres.trail.sequencer",
    "memory_backend": "memory.backend",
    "memory_repositories": "memory.repositories",
    "tokens": "retrieval.tokens",
    "bm25": "retrieval.bm25",
    "lexical_topk": "retrieval.lexical",
    "lexical_merger": "retrieval.merger",
    "vectors": "retrieval.cosine",
    "vector_engines": "retrieval.vector_engines",
    "vector_index": "retrieval.vector_index",
    "numeric": "retrieval.numeric",
    "retrieval_snapshots": "retrieval.snapshots",
    "snapshot_writer": "retrieval.snapshots",
    "indexer": "retrieval.indexer",
    "ranking_pool": "retrieval.ranking.pool",
    "ranking_wire": "retrieval.ranking.wire",
    "ranking_worker": "retrieval.ranking.worker",
    "turns_sqlite": "turns.sqlite",
    "turns_postgres": "turns.postgres",
    "turns_rows": "turns.rows",
    "indexing_config": "config",
}
"""Old module name (inside the package) to its new dotted path (inside the package).
The old ``retrieval`` (fusion) is not here: the ``retrieval`` package took its name and
answers its names itself."""


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self._target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self._target}; import it from there",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The target module ran when it was imported; only its own ``__spec__``, which
        the import system overwrote with the alias's, is put back."""
        module.__spec__ = self._spec


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds ``governed_memory_native.<old name>`` and hands back its new module."""

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _Alias(f"{PACKAGE}.{MOVED[name]}"))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once per process."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
