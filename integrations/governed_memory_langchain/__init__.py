"""Any LangChain chat model as the language model of governed memory (extra
``langchain``): :class:`LangChainLanguageModel` wraps a ``BaseChatModel`` for the
context builder's summaries and query condensing, fact extraction and ``remember``;
:func:`build_langchain_model` builds one from a profile's ``[stores.language_model]``
config (``kind = "langchain"``). See docs/chat-and-agents.md.

The names below load on first use: the plugin module is imported whenever plugins
load, and ``langchain-core`` must not be needed for that.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LangChainLanguageModel", "build_langchain_model"]

_MODULES = {"LangChainLanguageModel": "chat_model", "build_langchain_model": "loading"}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is not None:
        from importlib import import_module

        return getattr(import_module(f"governed_memory_langchain.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
