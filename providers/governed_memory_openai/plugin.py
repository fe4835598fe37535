"""Registers the OpenAI-compatible model adapter through ``register_language_models``.

``httpx`` is an optional dependency (the ``openai`` extra): the adapter is registered
either way, and building it without the package names the extra to install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from governed_memory import hookimpl
from governed_memory.errors import MemoryConfigurationError


def _build(config: Mapping[str, Any]) -> Any:
    try:
        from governed_memory_openai.client import build_openai_model
    except ImportError:
        raise MemoryConfigurationError(
            "language model 'openai' needs httpx: pip install 'governed-memory[openai]'"
        ) from None
    return build_openai_model(config)


@hookimpl
def register_language_models(register: Callable[..., None]) -> None:
    register("openai", _build,
             description="Any OpenAI-compatible /chat/completions server (base_url)")
