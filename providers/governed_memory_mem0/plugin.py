"""Registers the Mem0 provider; ``mem0ai`` is imported only when a provider is built."""

from __future__ import annotations

from collections.abc import Callable

from governed_memory.hookspecs import hookimpl


@hookimpl
def register_memory_providers(register: Callable[..., None]) -> None:
    del register  # filled in by issue 7's adapter
