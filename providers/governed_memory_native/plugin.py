"""Registers the native provider through the same entry point a third party would use."""

from __future__ import annotations

from collections.abc import Callable

from governed_memory import hookimpl

from governed_memory_native.factory import build_native_provider


@hookimpl
def register_memory_providers(register: Callable[..., None]) -> None:
    register(
        "native",
        build_native_provider,
        description="Built-in provider: SQLite (embedded, durable, default) or in-memory.",
    )
