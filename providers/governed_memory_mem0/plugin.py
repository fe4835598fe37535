"""Registers the Mem0 provider; ``mem0ai`` is imported only when a provider starts."""

from __future__ import annotations

from collections.abc import Callable

from governed_memory.hookspecs import hookimpl

from governed_memory_mem0.factory import build_mem0_provider


@hookimpl
def register_memory_providers(register: Callable[..., None]) -> None:
    register(
        "mem0",
        build_mem0_provider,
        description="Mem0 behind the governed contract: in-process mem0ai "
                    "(client = 'local') or the hosted Platform (client = 'platform').",
    )
