"""Prove a provider registered through the plugin system, by name (the CLI's route).

Storage never touches the operator's real data: every provider instance is built while
``GOVERNED_MEMORY_HOME`` points at a fresh empty directory, and ``{tmp}`` in any string
of the config is replaced by that directory (``{"path": "{tmp}/memory.db"}``).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

from governed_memory.clock import Clock
from governed_memory.plugins import PluginManager
from governed_memory.provider import MemoryProvider

from governed_memory_conformance.suite import ProviderConformance

HOME_ENV: Final = "GOVERNED_MEMORY_HOME"
"""The home directory convention the framework's CLI and the native provider share."""

PLACEHOLDER: Final = "{tmp}"


@functools.cache
def registered_factory(name: str) -> Any:
    """The factory a plugin registered under ``name`` (plugins load once per process)."""
    return PluginManager.load().providers.get(name).factory


def with_directory(value: Any, directory: Path) -> Any:
    """``value`` with ``{tmp}`` replaced by ``directory`` in every string, at any depth."""
    if isinstance(value, str):
        return value.replace(PLACEHOLDER, str(directory))
    if isinstance(value, Mapping):
        return {key: with_directory(item, directory) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [with_directory(item, directory) for item in value]
    return value


@contextlib.contextmanager
def home(directory: Path) -> Iterator[None]:
    previous = os.environ.get(HOME_ENV)
    os.environ[HOME_ENV] = str(directory)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(HOME_ENV, None)
        else:
            os.environ[HOME_ENV] = previous


class RegisteredProviderConformance(ProviderConformance):
    """Subclass with ``provider_name`` (and optionally ``provider_config``) set."""

    provider_config: ClassVar[Mapping[str, Any]] = {}

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        if not self.provider_name:
            raise NotImplementedError(f"{type(self).__name__} must set provider_name")
        directory = self.fresh_directory()
        config = with_directory(self.provider_config, directory)
        with home(directory):
            provider: MemoryProvider = registered_factory(self.provider_name)(config, clock)
            await provider.start()
        return provider
