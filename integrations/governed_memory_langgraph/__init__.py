"""governed-memory for LangGraph and LangChain (extra ``langgraph``).

- :class:`GovernedStore`: LangGraph's ``BaseStore`` (sync and async) over the governed
  memory manager, so graph nodes, ``get_store()`` users and LangMem's memory tools keep
  their code while every read and write is authorized, decided, traced and audited;
- :class:`NamespaceMapping` / :class:`NamespaceRule`: which scope a namespace lives in;
- :class:`GovernedRetriever`: a LangChain retriever over governed search;
- :func:`memory_tools`: ``remember``, ``recall`` and ``forget`` tools for tool-calling
  agents.

See docs/langgraph.md.
"""

from __future__ import annotations

from governed_memory_langgraph.items import record_key
from governed_memory_langgraph.namespaces import (
    DEFAULT_MAPPING,
    NamespaceMapping,
    NamespaceRule,
    Placement,
)
from governed_memory_langgraph.principals import PrincipalNotBoundError, PrincipalSource
from governed_memory_langgraph.retriever import GovernedRetriever
from governed_memory_langgraph.store import GovernedStore
from governed_memory_langgraph.tools import memory_tools

__all__ = [
    "DEFAULT_MAPPING",
    "GovernedRetriever",
    "GovernedStore",
    "NamespaceMapping",
    "NamespaceRule",
    "Placement",
    "PrincipalNotBoundError",
    "PrincipalSource",
    "memory_tools",
    "record_key",
]
