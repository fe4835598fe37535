"""The language model a profile names: ``[stores.language_model]``, a model adapter a
plugin registered (``register_language_models``, such as ``openai``) and its config.

The manager built from the profile carries it (``manager.language_model``) for
``remember``; nothing else requires one. Building an adapter does no I/O (the
OpenAI-compatible one connects on its first call), so a profile is checked against the
registered plugins by name and config without reaching a model server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from governed_memory.errors import MemoryConfigurationError
from governed_memory.language_models import LanguageModel
from governed_memory.plugins import PluginManager
from governed_memory.profiles.spec import MemoryProfileSpec

__all__ = ["LANGUAGE_MODEL_STORE", "build_language_model"]

LANGUAGE_MODEL_STORE: Final = "language_model"


def build_language_model(spec: MemoryProfileSpec,
                         plugins: PluginManager) -> LanguageModel | None:
    """The model the profile's ``[stores.language_model]`` names, built; ``None`` when
    it names none. A problem names its path (``stores.language_model.kind: ...``)."""
    store = spec.stores.get(LANGUAGE_MODEL_STORE)
    if store is None:
        return None
    path = f"stores.{LANGUAGE_MODEL_STORE}"
    try:
        registration = plugins.language_models.get(store.kind)
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(f"{path}.kind: {exc}") from None
    try:
        model = registration.factory({str(k): _plain(v) for k, v in store.config.items()})
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(f"{path}.config: {exc}") from None
    if not isinstance(model, LanguageModel):
        raise MemoryConfigurationError(
            f"{path}: the factory of {store.kind!r} built no language model")
    return model


def _plain(value: Any) -> Any:
    """A mutable copy of a frozen profile config value, as factories expect."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
