"""An OpenAI-compatible chat-completions adapter for the language-model protocol.

Any server speaking the ``/chat/completions`` wire format works (OpenAI, vLLM,
llama.cpp's server, Ollama's OpenAI endpoint, ...): point ``base_url`` at it.

The names below load on first use: the plugin module is imported whenever plugins
load, and ``httpx`` (the ``openai`` extra) must not be needed for that.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OpenAICompatibleModel", "build_openai_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from governed_memory_openai import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
