"""Prove a provider registered through the plugin system, by name (the CLI's route).

Storage never touches the operator's real data, and no two provider instances share it:

- every instance is built while ``GOVERNED_MEMORY_HOME`` points at a fresh empty
  directory, and ``{tmp}`` in any string of the config is replaced by that directory
  (``{"path": "{tmp}/memory.db"}``);
- ``{namespace}`` in any string of the config is replaced by a token unique to the
  instance (``gmc`` and 16 hex digits: lowercase letters and digits, valid as a key
  prefix, schema, database or collection name), for storage on a server
  (``{"key_prefix": "acme:{namespace}:"}``); a reopened instance gets the same token;
- a new instance must list nothing in the scopes the suite writes to, or the test fails
  saying so (leftovers of an earlier run, or a config that ignores the namespace);
- before a provider is closed for good, the cleanup hook runs: the provider's own
  ``dispose_storage()`` if it has one (see ``ConformanceBase.cleanup_provider``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

from governed_memory.clock import Clock, ManualClock
from governed_memory.plugins import PluginManager
from governed_memory.provider import MemoryProvider

from governed_memory_conformance.harness import assert_empty
from governed_memory_conformance.suite import ProviderConformance

HOME_ENV: Final = "GOVERNED_MEMORY_HOME"
"""The home directory convention the framework's CLI and the native provider share."""

PLACEHOLDER: Final = "{tmp}"
NAMESPACE_PLACEHOLDER: Final = "{namespace}"


@functools.cache
def registered_factory(name: str) -> Any:
    """The factory a plugin registered under ``name`` (plugins load once per process)."""
    return PluginManager.load().providers.get(name).factory


def new_namespace() -> str:
    return "gmc" + uuid.uuid4().hex[:16]


def with_placeholders(value: Any, directory: Path, namespace: str) -> Any:
    """``value`` with ``{tmp}`` and ``{namespace}`` replaced in every string, at any depth."""
    if isinstance(value, str):
        return value.replace(PLACEHOLDER, str(directory)).replace(NAMESPACE_PLACEHOLDER,
                                                                  namespace)
    if isinstance(value, Mapping):
        return {key: with_placeholders(item, directory, namespace)
                for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [with_placeholders(item, directory, namespace) for item in value]
    return value


def with_directory(value: Any, directory: Path) -> Any:
    """``value`` with ``{tmp}`` replaced by ``directory`` in every string, at any depth."""
    return with_placeholders(value, directory, NAMESPACE_PLACEHOLDER)


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
    _instance: tuple[Path, str] | None = None

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        if not self.provider_name:
            raise NotImplementedError(f"{type(self).__name__} must set provider_name")
        self._instance = (self.fresh_directory(), new_namespace())
        provider = await self._build(clock)
        try:
            await assert_empty(provider, clock if isinstance(clock, ManualClock)
                               else ManualClock(clock.now()), self.describe())
        except BaseException:
            await provider.close()  # leave the leftovers for the operator to see
            raise
        return provider

    async def reopen_provider(self, clock: Clock) -> MemoryProvider:
        """The same directory and namespace as the instance ``make_provider`` built last."""
        return await self._build(clock)

    async def _build(self, clock: Clock) -> MemoryProvider:
        assert self._instance is not None, "make_provider has not run in this test"
        directory, namespace = self._instance
        config = with_placeholders(self.provider_config, directory, namespace)
        with home(directory):
            provider: MemoryProvider = registered_factory(self.provider_name)(config, clock)
            await provider.start()
        return provider
