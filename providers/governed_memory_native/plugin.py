"""Registers the native provider through the same entry point a third party would use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from governed_memory import hookimpl

from governed_memory_native.factory import build_native_provider

if TYPE_CHECKING:
    from governed_memory.clock import Clock


@hookimpl
def register_memory_providers(register: Callable[..., None]) -> None:
    register(
        "native",
        build_native_provider,
        description="Built-in provider: SQLite (embedded, durable, default) or in-memory.",
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
