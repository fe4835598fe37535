"""The two ways to reach Mem0, behind one narrow interface the adapter drives.

``LocalMem0`` wraps ``mem0.Memory`` in this process; ``PlatformMem0`` wraps mem0's own
``MemoryClient`` against a Platform host. Both are synchronous: the adapter calls them
from a worker thread under its store lock, one operation at a time.

Only the adapter's namespace ever reaches Mem0 as an entity id (never a scope value, so
never a ``"*"``), and only equality filters on that id are sent: no filter operator can
be built from caller input.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, Protocol

import attrs
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryUnavailableError,
)

from governed_memory_mem0.config import LocalConfig, PlatformConfig, VectorStoreKind
from governed_memory_mem0.embedding import Mem0EmbedderBridge
from governed_memory_mem0.errors import is_not_found

GM_KEY: Final = "governed_memory"
"""The one metadata key the adapter writes: everything of ours nests under it, so no
caller metadata can collide with Mem0's own payload keys (``data``, ``hash``, ...)."""

PAGE: Final = 100
STRAY_ROOM: Final = 16
"""Room for memories in a namespace the ledger does not count (orphans of timed-out
writes), so they cannot push a counted one out of a full answer."""


@attrs.frozen(slots=True)
class Item:
    """One Mem0 memory as the adapter reads it."""

    mem0_id: str
    text: str
    marker: Mapping[str, Any] | None
    """Our metadata (``GM_KEY``), or ``None`` for a memory the adapter did not write."""
    namespace: str | None
    score: float | None = None


def _item(raw: Mapping[str, Any], score: float | None = None) -> Item:
    metadata = raw.get("metadata") or {}
    marker = metadata.get(GM_KEY) if isinstance(metadata, Mapping) else None
    text = raw.get("memory")
    if text is None and isinstance(raw.get("data"), Mapping):
        text = raw["data"].get("memory")
    return Item(mem0_id=str(raw.get("id")), text=str(text or ""),
                marker=marker if isinstance(marker, Mapping) else None,
                namespace=raw.get("user_id"), score=score)


class Mem0Client(Protocol):
    kind: str

    def start(self) -> None: ...

    def close(self) -> None: ...

    def check(self) -> str: ...

    def add(self, namespace: str, text: str, marker: Mapping[str, Any]) -> str | None:
        """The new memory's id, or ``None`` when Mem0 queued it without answering one."""
        ...

    def get(self, mem0_id: str) -> Item | None: ...

    def update(self, mem0_id: str, text: str | None, marker: Mapping[str, Any]) -> None: ...

    def delete(self, mem0_id: str) -> bool:
        """``False`` when Mem0 had no such memory."""
        ...

    def search(self, namespace: str, query: str, top_k: int) -> list[Item]: ...

    @property
    def exact_filters(self) -> bool:
        """Whether a search filters by namespace before ranking: if not (faiss), a short
    answer may mean "crowded out by other namespaces", not "nothing more"."""

    def full_cover(self, held: int) -> int:
        """A ``top_k`` whose answer surely includes every memory of a namespace the ledger
        says holds ``held`` (where the store can tell, strays too)."""
        ...

    def items(self, namespace: str) -> Iterator[Item]:
        """Every memory of the namespace, page by page, never silently truncated."""
        ...

    def erase_history(self, mem0_ids: Sequence[str]) -> int:
        """Remove what Mem0's own history keeps of these memories; returns entries that
        are still readable afterwards (0 when erasure is complete)."""
        ...

    def history_texts(self, mem0_id: str) -> list[str]: ...


class LocalMem0:
    """``mem0.Memory`` in this process, offline (see ``offline.import_mem0``)."""

    kind = "local"

    def __init__(self, config: LocalConfig, bridge: Mem0EmbedderBridge) -> None:
        self._config = config
        self._bridge = bridge
        self.memory: Any = None

    def start(self) -> None:
        from governed_memory_mem0.offline import import_mem0

        mem0 = import_mem0(self._config.mem0_dir)
        dims = self._bridge.identity.dimension
        store: dict[str, Any] = {"collection_name": self._config.collection,
                                 "embedding_model_dims": dims}
        if self._config.vector_store is VectorStoreKind.FAISS:
            store.update(path=self._config.vector_path, distance_strategy="cosine")
        elif self._config.vector_path == ":memory:":
            store.update(path=":memory:", on_disk=False)
        else:
            store.update(path=self._config.vector_path, on_disk=True)
        if self._config.history_db_path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self._config.history_db_path)),
                        exist_ok=True)
        # Mem0 builds its LLM and embedder clients eagerly and wants a key for them; the
        # adapter never lets either run (infer=False, embedder replaced below).
        memory = mem0.Memory.from_config({
            "vector_store": {"provider": self._config.vector_store.value, "config": store},
            "llm": {"provider": "openai", "config": {"api_key": "unused-offline"}},
            "embedder": {"provider": "openai",
                         "config": {"api_key": "unused-offline", "embedding_dims": dims}},
            "history_db_path": self._config.history_db_path,
        })
        memory.embedding_model = self._bridge
        with memory.db._lock:
            # Erased text must not survive in freed pages of Mem0's history file.
            memory.db.connection.execute("PRAGMA secure_delete = ON")
        self.memory = memory

    def close(self) -> None:
        memory, self.memory = self.memory, None
        if memory is None:
            return
        client = getattr(memory.vector_store, "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()  # Qdrant local prints a traceback at exit otherwise
        memory.close()

    def check(self) -> str:
        self._memory().vector_store.col_info()
        return f"mem0 local ({self._config.vector_store.value})"

    def _memory(self) -> Any:
        if self.memory is None:
            raise RuntimeError("mem0 is not started")
        return self.memory

    def add(self, namespace: str, text: str, marker: Mapping[str, Any]) -> str | None:
        result = self._memory().add([{"role": "user", "content": text}], user_id=namespace,
                                    metadata={GM_KEY: dict(marker)}, infer=False)
        added = result.get("results") or []
        return str(added[0]["id"]) if added else None

    def get(self, mem0_id: str) -> Item | None:
        raw = self._memory().get(mem0_id)
        return None if raw is None else _item(raw)

    def update(self, mem0_id: str, text: str | None, marker: Mapping[str, Any]) -> None:
        self._memory().update(mem0_id, text=text, metadata={GM_KEY: dict(marker)})

    def delete(self, mem0_id: str) -> bool:
        memory = self._memory()
        if memory.vector_store.get(vector_id=mem0_id) is None:
            return False
        memory.delete(mem0_id)
        return True

    @property
    def exact_filters(self) -> bool:
        return self._config.vector_store is not VectorStoreKind.FAISS

    def full_cover(self, held: int) -> int:
        if self._config.vector_store is not VectorStoreKind.FAISS:
            return held + STRAY_ROOM
        # faiss ranks the whole collection and filters by namespace afterwards, so a
        # short answer proves nothing; a top_k of the collection's size is sure to hold
        # the namespace's every memory, strays included.
        return max(held + STRAY_ROOM, int(self._memory().vector_store.index.ntotal))

    def search(self, namespace: str, query: str, top_k: int) -> list[Item]:
        memory = self._memory()
        found = memory.search(query, filters={"user_id": namespace}, top_k=top_k,
                              threshold=0.0)
        return [_item(raw, float(raw.get("score") or 0.0)) for raw in found["results"]]

    def items(self, namespace: str) -> Iterator[Item]:
        from mem0.memory.main import _vector_store_list_rows  # type: ignore[import-untyped]

        memory = self._memory()
        # Not get_all: it truncates at top_k and hides Mem0-expired memories.
        listed = memory.vector_store.list(filters={"user_id": namespace}, top_k=10**9)
        for row in _vector_store_list_rows(listed):
            payload = dict(row.payload or {})
            yield _item({"id": row.id, "memory": payload.get("data"),
                         "metadata": {GM_KEY: payload.get(GM_KEY)},
                         "user_id": payload.get("user_id")})

    def erase_history(self, mem0_ids: Sequence[str]) -> int:
        db = self._memory().db
        with db._lock:
            for start in range(0, len(mem0_ids), 500):
                chunk = list(mem0_ids[start:start + 500])
                db.connection.execute(
                    f"DELETE FROM history WHERE memory_id IN ({','.join('?' * len(chunk))})",
                    chunk)
            db.connection.commit()
        return sum(len(self.history_texts(mem0_id)) for mem0_id in mem0_ids)

    def history_texts(self, mem0_id: str) -> list[str]:
        rows = self._memory().history(mem0_id)
        return [str(t) for row in rows for t in (row.get("old_memory"), row.get("new_memory"))
                if t]


class PlatformMem0:
    """mem0's ``MemoryClient`` against a Platform host (or the test wire server)."""

    kind = "platform"

    def __init__(self, config: PlatformConfig, timeout_s: float) -> None:
        self._config = config
        self._timeout_s = timeout_s
        self.client: Any = None

    def start(self) -> None:
        from governed_memory_mem0.offline import import_mem0

        import_mem0(None)
        import httpx
        from mem0 import MemoryClient  # type: ignore[import-untyped]

        _quiet_mem0_client_logs()
        api_key = os.environ.get(self._config.api_key_env, "")
        if not api_key:
            raise MemoryConfigurationError(
                f"the Mem0 API key variable {self._config.api_key_env} is not set")
        http = httpx.Client(timeout=self._timeout_s)
        error: GovernedMemoryError
        try:
            # The constructor pings the host; a refused key surfaces as ValueError there.
            self.client = MemoryClient(api_key=api_key, host=self._config.host, client=http)
            return
        except ValueError:
            error = MemoryConfigurationError("the Mem0 Platform refused the adapter's key")
        except httpx.HTTPError:
            error = MemoryUnavailableError("the Mem0 Platform host could not be reached")
        http.close()
        raise error

    def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.client.close()

    def _client(self) -> Any:
        if self.client is None:
            raise RuntimeError("the Mem0 Platform client is not started")
        return self.client

    def check(self) -> str:
        self._client().client.get("/v1/ping/").raise_for_status()
        return "mem0 platform"

    def add(self, namespace: str, text: str, marker: Mapping[str, Any]) -> str | None:
        result = self._client().add([{"role": "user", "content": text}], user_id=namespace,
                                    metadata={GM_KEY: dict(marker)}, infer=False)
        added = result.get("results") or []
        return str(added[0]["id"]) if added else None

    def get(self, mem0_id: str) -> Item | None:
        try:
            raw = self._client().get(mem0_id)
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise
        return _item(raw)

    def update(self, mem0_id: str, text: str | None, marker: Mapping[str, Any]) -> None:
        body: dict[str, Any] = {"metadata": {GM_KEY: dict(marker)}}
        if text is not None:
            body["text"] = text
        self._client().update(mem0_id, **body)

    def delete(self, mem0_id: str) -> bool:
        try:
            self._client().delete(mem0_id)
        except Exception as exc:
            if is_not_found(exc):
                return False
            raise
        return True

    exact_filters = True

    def full_cover(self, held: int) -> int:
        return held + STRAY_ROOM

    def search(self, namespace: str, query: str, top_k: int) -> list[Item]:
        found = self._client().search(query, filters={"user_id": namespace}, top_k=top_k,
                                      threshold=0.0)
        rows = found.get("results", []) if isinstance(found, Mapping) else found
        return [_item(raw, float(raw.get("score") or 0.0)) for raw in rows]

    def items(self, namespace: str) -> Iterator[Item]:
        page = 1
        while True:
            found = self._client().get_all(filters={"user_id": namespace}, page=page,
                                           page_size=PAGE)
            for raw in found.get("results", []):
                yield _item(raw)
            if not found.get("next"):
                return
            page += 1

    def erase_history(self, mem0_ids: Sequence[str]) -> int:
        # The Platform has no call to erase history; deleting the memory must. Verify it.
        return sum(len(self.history_texts(mem0_id)) for mem0_id in mem0_ids)

    def history_texts(self, mem0_id: str) -> list[str]:
        try:
            rows = self._client().history(mem0_id)
        except Exception as exc:
            if is_not_found(exc):
                return []
            raise
        return [str(t) for row in rows for t in (row.get("old_memory"), row.get("new_memory"))
                if t]


class _WithheldDetail(logging.Filter):
    """mem0's client logs every HTTP error with its URL (the host) and the server's
    text; the record is kept, its detail is not."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = "mem0 client request failed (detail withheld by governed-memory)"
        record.args = ()
        return True


def _quiet_mem0_client_logs() -> None:
    logger = logging.getLogger("mem0.client.utils")
    if not any(isinstance(f, _WithheldDetail) for f in logger.filters):
        logger.addFilter(_WithheldDetail())


def history_db_texts(path: str) -> list[str]:
    """Every text in a Mem0 history database file (for erasure evidence and tests)."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT old_memory, new_memory FROM history").fetchall()
    return [t for row in rows for t in row if t]
