"""Registers the LangChain chat-model adapter through ``register_language_models``.

``langchain-core`` is an optional dependency (the ``langchain`` extra, also in
``langgraph``): this module imports none of it, so loading plugins never needs it, and
building the adapter without the package names the extra to install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from governed_memory import hookimpl
from governed_memory.errors import MemoryConfigurationError


def _build(config: Mapping[str, Any]) -> Any:
    try:
        from governed_memory_langchain.loading import build_langchain_model
    except ImportError:
        raise MemoryConfigurationError(
            "language model 'langchain' needs langchain-core: "
            "pip install 'governed-memory[langchain]'") from None
    return build_langchain_model(config)


@hookimpl
def register_language_models(register: Callable[..., None]) -> None:
    register("langchain", _build,
             description="Any LangChain chat model (class = its import path, args = its "
                         "keyword arguments)")
