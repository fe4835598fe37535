"""``build_native_provider``: profile config in, unstarted provider out, no I/O.

The plugin module registers this function, so importing this module is part of every
``PluginManager.load()``: the provider and its backends are imported when the function
first runs, and only the backend the config names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_memory.clock import Clock
    from governed_memory.rates import RateWindows

    from governed_memory_native.extraction.queue import ClosableJobStore
    from governed_memory_native.provider import NativeMemoryProvider
    from governed_memory_native.storage.port import StorageBackend


def build_native_provider(config: Mapping[str, Any], clock: Clock) -> NativeMemoryProvider:
    from governed_memory.errors import MemoryConfigurationError

    from governed_memory_native.config import BackendKind, parse_config, parse_indexing_config
    from governed_memory_native.provider import NativeMemoryProvider

    settings = parse_config(config)
    backend: StorageBackend
    rates: RateWindows | None = None  # the memory backend's: windows in this process
    jobs: ClosableJobStore
    if settings.backend is BackendKind.MEMORY:
        from governed_memory_native.extraction.memory import MemoryExtractionJobs
        from governed_memory_native.memory.backend import MemoryBackend

        backend = MemoryBackend()
        jobs = MemoryExtractionJobs()
    elif settings.backend is BackendKind.POSTGRES:
        try:  # imported here: psycopg is the optional ``postgres`` extra
            from governed_memory_native.postgres.backend import PostgresBackend
        except ImportError:
            raise MemoryConfigurationError(
                "backend: 'postgres' needs psycopg (pip install 'governed-memory[postgres]')"
            ) from None
        assert settings.dsn is not None  # parse_config always resolves a postgres dsn
        backend = PostgresBackend(
            settings.dsn, schema=settings.schema, pool_min_size=settings.pool_min_size,
            pool_max_size=settings.pool_max_size, busy_timeout_ms=settings.busy_timeout_ms,
        )
        from governed_memory_native.postgres.rates import PostgresRateWindows

        rates = PostgresRateWindows(settings.dsn, schema=settings.schema,
                                    busy_timeout_ms=settings.busy_timeout_ms)
        from governed_memory_native.extraction.postgres import PostgresExtractionJobs

        jobs = PostgresExtractionJobs(settings.dsn, schema=settings.schema,
                                      busy_timeout_ms=settings.busy_timeout_ms)
    else:
        from governed_memory_native.sqlite.backend import SqliteBackend
        from governed_memory_native.sqlite.rates import SqliteRateWindows, sidecar_path

        assert settings.path is not None  # parse_config always resolves a sqlite path
        backend = SqliteBackend(settings.path, busy_timeout_ms=settings.busy_timeout_ms)
        rates = SqliteRateWindows(sidecar_path(settings.path),
                                  busy_timeout_ms=settings.busy_timeout_ms)
        from governed_memory_native.extraction.sqlite import SqliteExtractionJobs

        jobs = SqliteExtractionJobs(settings.path, busy_timeout_ms=settings.busy_timeout_ms)
    return NativeMemoryProvider(backend, clock, indexing=parse_indexing_config(config),
                                rate_windows=rates, extraction_jobs=jobs)
