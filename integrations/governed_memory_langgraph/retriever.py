"""``GovernedRetriever``: a LangChain retriever whose every query is a governed search.

Each ``invoke`` is one ``manager.search`` as the call's principal over the scopes derived
from it (default: its user scope), so the scope rule, the policies, the trace and the
audit trail apply as to any search, and a hit can only be a record those scopes hold.
A document's ``page_content`` is the record's content; its ``metadata`` carries the
record's id, key, type, score and rank, revision, scope and the record's own metadata.

Retrieved memories are data a user or a tool once wrote, not instructions: put them
into a prompt inside a quoted boundary, as the ``recall`` tool and the per-turn context
builder do (``governed_memory.turncontext.render``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from governed_memory import GovernedMemoryManager, MemoryType, Principal, SearchHit
from governed_memory.sync import SyncMemoryManager
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr

from governed_memory_langgraph.access import MemoryAccess, ScopesChoice
from governed_memory_langgraph.ports import MemoryPort
from governed_memory_langgraph.principals import PrincipalFrom

__all__ = ["GovernedRetriever", "document"]


def document(hit: SearchHit) -> Document:
    """One search hit as a LangChain document."""
    record = hit.record
    return Document(
        page_content=record.content,
        id=record.id,
        metadata={
            "id": record.id, "key": record.key, "memory_type": record.memory_type.value,
            "score": hit.score, "rank": hit.rank, "revision": record.revision,
            "version": record.version, "scope": record.scope.dimensions(),
            "created_at": record.created_at, "updated_at": record.updated_at,
            "metadata": dict(record.metadata),
        })


class GovernedRetriever(BaseRetriever):
    """Governed search as a retriever.

    ``manager`` is the async manager (``ainvoke``) or the sync facade (``invoke``, and
    ``ainvoke`` in a worker thread). ``principal`` fixes who searches; without it the
    principal comes from the run the retriever is called in (its context or
    ``config["configurable"]["principal"]``: see ``governed_memory_langgraph.principals``).
    ``scopes`` is a scope, several, or a function of the principal (default: its user
    scope). ``k`` defaults to the profile's ``retrieval.top_k``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    manager: GovernedMemoryManager | SyncMemoryManager
    principal: Principal | None = None
    principal_key: str = "principal"
    principal_from: PrincipalFrom | None = None
    scopes: ScopesChoice | None = None
    k: int | None = None
    memory_types: Sequence[MemoryType | str] = ()
    metadata_filter: Mapping[str, Any] = {}

    _access: MemoryAccess = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._access = MemoryAccess.build(
            self.manager, principal=self.principal, principal_key=self.principal_key,
            principal_from=self.principal_from, read_scopes=self.scopes)

    async def _search(self, port: MemoryPort, principal: Principal,
                      query: str) -> list[Document]:
        result = await port.search(principal, self._access.scopes_for(principal), query,
                                   limit=self.k, metadata_filter=self.metadata_filter,
                                   memory_types=tuple(self.memory_types))
        return [document(hit) for hit in result.hits]

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        principal = self._access.principal()
        return self._access.call(lambda port: self._search(port, principal, query))

    async def _aget_relevant_documents(
            self, query: str, *,
            run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        principal = self._access.principal()
        return await self._access.acall(lambda port: self._search(port, principal, query))
