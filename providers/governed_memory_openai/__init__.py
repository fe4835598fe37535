"""An OpenAI-compatible chat-completions adapter for the language-model protocol.

Any server speaking the ``/chat/completions`` wire format works (OpenAI, vLLM,
llama.cpp's server, Ollama's OpenAI endpoint, ...): point ``base_url`` at it.
"""

from governed_memory_openai.client import OpenAICompatibleModel, build_openai_model

__all__ = ["OpenAICompatibleModel", "build_openai_model"]
