"""governed-memory for LangGraph and LangChain (extra ``langgraph``).

- :class:`GovernedStore`: LangGraph's ``BaseStore`` (sync and async) over the governed
  memory manager, so graph nodes, ``get_store()`` users and LangMem's memory tools keep
  their code while every read and write is authorized, decided, traced and audited;
- :class:`NamespaceMapping` / :class:`NamespaceRule`: which scope a namespace lives in;
- :class:`GovernedRetriever`: a LangChain retriever over governed search;
- :func:`memory_tools`: ``remember``, ``recall`` and ``forget`` tools for tool-calling
  agents;
- :func:`block_tools`: ``read_blocks``, ``block_append``, ``block_replace`` and
  ``block_rethink`` over the memory blocks a profile declares (Letta's core memory);
- :func:`conversation_tool`: ``remember_conversation``, the run's conversation turned
  into memories by the manager's ``remember`` (:func:`messages_from_langchain` for a
  node that does it without the model asking).

See docs/langgraph.md.
"""

from __future__ import annotations

from governed_memory_langgraph.block_tools import block_tools
from governed_memory_langgraph.conversation import conversation_tool, messages_from_langchain
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
    "block_tools",
    "conversation_tool",
    "memory_tools",
    "messages_from_langchain",
    "record_key",
]
