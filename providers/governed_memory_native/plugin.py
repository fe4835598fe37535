"""Registers the native provider through the same entry point a third party would use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from governed_memory import hookimpl

from governed_memory_native.factory import build_native_provider

if TYPE_CHECKING:
    from governed_memory.clock import Clock

    from governed_memory_native.provider import NativeMemoryProvider


class _NativeFactory:
    """``build_native_provider``, and what each backend declares (``variants``) for
    ``governed-memory providers list``, told without importing a backend's driver
    (psycopg) or reaching its server. tests/cli/test_providers_list_backends.py holds
    each declaration to what the built provider says."""

    def __call__(self, config: Mapping[str, Any], clock: Clock) -> NativeMemoryProvider:
        return build_native_provider(config, clock)

    def variants(self) -> list[dict[str, Any]]:
        import importlib.util

        from governed_memory.capabilities import Capabilities

        from governed_memory_native.provider import NATIVE_FEATURES

        def installed(*modules: str) -> bool:
            try:
                return all(importlib.util.find_spec(name) is not None for name in modules)
            except (ImportError, ValueError):  # a parent missing, or blocked in sys.modules
                return False

        def declared(durable: bool, multi_process: bool) -> Capabilities:
            return Capabilities(durable=durable, transactional=True,
                                multi_process=multi_process, usage=True, event_outbox=True,
                                **NATIVE_FEATURES)

        postgres = {"name": "postgres", "config": {"backend": "postgres"},
                    "description": "PostgreSQL: shared by every process and node (dsn, or "
                                   "$GOVERNED_MEMORY_POSTGRES_DSN).",
                    "capabilities": declared(True, True)}
        if not installed("psycopg", "psycopg_pool"):
            postgres["missing"] = "pip install 'governed-memory[postgres]'"
        return [
            {"name": "sqlite", "config": {"backend": "sqlite"},
             "description": "The default: an embedded SQLite file (WAL), durable, one "
                            "machine, several processes.",
             "capabilities": declared(True, True)},
            {"name": "memory", "config": {"backend": "memory"},
             "description": "Process memory: tests and demos, gone with the process.",
             "capabilities": declared(False, False)},
            postgres,
        ]


@hookimpl
def register_memory_providers(register: Callable[..., None]) -> None:
    register(
        "native",
        _NativeFactory(),
        description="Built-in provider: SQLite (embedded, durable, default), in-memory, "
                    "or PostgreSQL (shared by every process and node).",
    )


def _memory_turns(config: Mapping[str, Any], clock: Clock) -> Any:
    from governed_memory.errors import MemoryConfigurationError
    from governed_memory.tiers.turns import InMemoryTurnStore

    if config:
        raise MemoryConfigurationError("turn store 'memory' takes no configuration")
    return InMemoryTurnStore()


def _sqlite_turns(config: Mapping[str, Any], clock: Clock) -> Any:
    from governed_memory_native.turns.sqlite import build_sqlite_turn_store

    return build_sqlite_turn_store(config, clock)


def _postgres_turns(config: Mapping[str, Any], clock: Clock) -> Any:
    try:
        from governed_memory_native.turns.postgres import build_postgres_turn_store
    except ImportError:
        from governed_memory.errors import MemoryConfigurationError

        raise MemoryConfigurationError(
            "turn store 'postgres' needs psycopg: pip install 'governed-memory[postgres]'"
        ) from None
    return build_postgres_turn_store(config, clock)


@hookimpl
def register_turn_stores(register: Callable[..., None]) -> None:
    register("memory", _memory_turns,
             description="Conversation turns in process memory (tests, demos; not durable).")
    register("sqlite", _sqlite_turns,
             description="Conversation turns in an embedded SQLite file (durable, WAL).")
    register("postgres", _postgres_turns,
             description="Conversation turns in PostgreSQL (shared by every process).")


def _memory_blocks(config: Mapping[str, Any], clock: Clock) -> Any:
    from governed_memory.errors import MemoryConfigurationError
    from governed_memory.tiers.blocks import InMemoryBlockStore

    if config:
        raise MemoryConfigurationError("block store 'memory' takes no configuration")
    return InMemoryBlockStore()


def _sqlite_blocks(config: Mapping[str, Any], clock: Clock) -> Any:
    from governed_memory_native.blocks.sqlite import build_sqlite_block_store

    return build_sqlite_block_store(config, clock)


def _postgres_blocks(config: Mapping[str, Any], clock: Clock) -> Any:
    try:
        from governed_memory_native.blocks.postgres import build_postgres_block_store
    except ImportError:
        from governed_memory.errors import MemoryConfigurationError

        raise MemoryConfigurationError(
            "block store 'postgres' needs psycopg: pip install 'governed-memory[postgres]'"
        ) from None
    return build_postgres_block_store(config, clock)


@hookimpl
def register_block_stores(register: Callable[..., None]) -> None:
    register("memory", _memory_blocks,
             description="Memory blocks in process memory (tests, demos; not durable).")
    register("sqlite", _sqlite_blocks,
             description="Memory blocks in an embedded SQLite file (durable, WAL).")
    register("postgres", _postgres_blocks,
             description="Memory blocks in PostgreSQL (shared by every process).")


def _postgres_trail(config: Mapping[str, Any]) -> Any:
    try:
        from governed_memory_native.postgres.trail.sink import postgres_trail_from_config
    except ImportError:
        from governed_memory.errors import MemoryConfigurationError

        raise MemoryConfigurationError(
            "event sink 'postgres-trail' needs psycopg: pip install 'governed-memory[postgres]'"
        ) from None
    return postgres_trail_from_config(config)


@hookimpl
def register_event_sinks(register: Callable[..., None]) -> None:
    register("postgres-trail", _postgres_trail,
             description="hash-chained audit trail in PostgreSQL, shared by every node "
                         "(governed-memory audit verify --store)")
