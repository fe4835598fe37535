"""The language model a profile names: ``[stores.language_model]``, a model adapter a
plugin registered (``register_language_models``, such as ``openai``) and its config.

The manager built from the profile carries it (``manager.language_model``) for
``remember``; nothing else requires one. Building an adapter does no I/O (the
OpenAI-compatible one connects on its first call), so a profile is checked against the
registered plugins by name and config without reaching a model server.
"""

from __future__ import annotations

from typing import Final

from governed_memory.language_models import LanguageModel
from governed_memory.plugins import PluginManager
from governed_memory.profile_stores import build_store
from governed_memory.profiles.spec import MemoryProfileSpec

__all__ = ["LANGUAGE_MODEL_STORE", "build_language_model"]

LANGUAGE_MODEL_STORE: Final = "language_model"


def build_language_model(spec: MemoryProfileSpec,
                         plugins: PluginManager) -> LanguageModel | None:
    """The model the profile's ``[stores.language_model]`` names, built; ``None`` when
    it names none. A problem names its path (``stores.language_model.kind: ...``)."""
    return build_store(spec, LANGUAGE_MODEL_STORE, plugins.language_models.get,
                       LanguageModel, "language model")
