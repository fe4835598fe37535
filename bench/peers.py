"""Governed memory against its peers on one workload: raw SQLite FTS5, LangGraph's
``SqliteStore``, mem0 and governed-memory on each backend, lexical and hybrid.

Full run (the figures in ``bench/results/peers.md``; about 30-40 min on 2 cores, run it on a
quiet machine), after ``pip install -e '.[bench]'``::

    .venv/bin/python bench/peers.py --records 10000 --ops 300 --rounds 3

Quick proof that every system runs (seconds)::

    .venv/bin/python bench/peers.py --quick --out /tmp/peers

Workload (the same for every system): one user's store seeded with ``--records``
memories (12-word sentences from the Zipf corpus in ``bench/corpus.py``), then
``--ops`` iterations of add, get (a random seeded id), search (top 10, a 2-word query
drawn as ``bench/scale.py`` draws it), update (a random seeded id, new text) and delete
(the memory this iteration added, so the store keeps its size); 20 iterations are run
untimed first. Every call is timed alone (``perf_counter_ns``). Then a search burst of
``--ops`` searches runs with a ticker task that sleeps 1 ms and records how late it
wakes (event-loop lag), and with file sizes and commit counters read around it.

Systems (``--systems``; names as in the tables):

- ``fts5``: raw ``sqlite3`` (WAL, ``synchronous=FULL``), a table plus an FTS5 index
  written in one transaction; search = ``MATCH`` of the query words OR-ed, ``ORDER BY
  bm25`` LIMIT 10. Called synchronously on the loop: the floor for lexical search.
- ``langgraph-sqlite``: ``langgraph.store.sqlite.SqliteStore`` as shipped (rollback
  journal, SQLite's default ``synchronous=FULL``), called synchronously. Without an
  index configured its ``search`` ignores the query and lists the namespace: its search
  column is a listing, not a ranked search.
- ``langgraph-sqlite-vec``: the same store with a sqlite-vec index (64-d hashing
  embedder); needs a sqlite3 that can load extensions: the standard library's when this
  Python was built with it, else ``pysqlite3`` (``pysqlite3-binary``, its own bundled
  SQLite, named in the row's note); skipped when neither is there.
- ``mem0``: ``mem0ai`` ``Memory`` (as the governed Mem0 adapter builds it) with Qdrant in
  memory, ``infer=False``, the governed 64-d hashing embedder called inline; sync calls.
- ``gm-<backend>-<mode>``: ``GovernedMemoryManager`` on the native provider, backends
  ``memory``, ``sqlite`` (``synchronous=FULL``) and ``postgres``; ``lexical`` (BM25) or
  ``hybrid`` (plus exact vectors from the ``hashing`` embedder at 64 dimensions, embedded
  on write, fused ranking) selected by a profile.
- ``native-sqlite``: the native provider on SQLite called directly (no manager, no
  policy, no events): what governance itself costs is the gap to ``gm-sqlite-lexical``.

Seeding is not timed into the operations: peers seed through their own batch APIs
(one transaction for FTS5, ``batch`` of puts for LangGraph, ``add`` per memory for mem0,
which has no batch write); governed systems through ``bench/seeding.py``, a durable
store (SQLite, PostgreSQL) before the manager opens it, as an application finds it.

Every (system, round) runs in a fresh subprocess; rounds are interleaved (each system's
round 1, then each system's round 2, ...) so machine drift lands on all alike; the
1-minute load average is recorded before and after every run. Medians and p95 pool the
samples of all rounds. Writes ``<out>.json`` and ``<out>.md`` (default
``bench/results/peers``).

Columns: ``median (p95)`` in µs per call; ``÷ SqliteStore`` and ``÷ FTS5`` are ratios of
medians; ``lag max / p99`` is how late the 1 ms ticker woke during the search burst
(a synchronous peer blocks the loop for a whole call); ``bytes/search`` is the growth of
the store's files (main + WAL or journal) over the burst divided by its searches;
``commits/search`` comes from the backend's ``stats`` counters when it has them, else
n/a.

    python bench/peers.py                              # 10,000 records, 300 ops, 3 rounds
    python bench/peers.py --records 2000 --rounds 1 --systems fts5 gm-sqlite-lexical
    python bench/peers.py --quick --out /tmp/peers     # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# A bench file named after a peer (bench/mem0.py) must not shadow the peer's package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.append(str(HERE))
os.environ.setdefault("MEM0_TELEMETRY", "False")

from corpus import Corpus  # noqa: E402  (after the path fix above, on purpose)
from governed_memory import (  # noqa: E402
    GovernedMemoryManager,
    Permission,
    Principal,
    PrincipalKind,
    Scope,
)
from governed_memory.clock import SystemClock  # noqa: E402
from governed_memory.operation_context import OperationContext  # noqa: E402
from governed_memory.requests import (  # noqa: E402
    AddRequest,
    DeleteRequest,
    GetRequest,
    SearchRequest,
    UpdateRequest,
)
from seeding import seed_texts, storage  # noqa: E402

RESULTS = HERE / "results"
SYLLABLES = tuple("kalominuperasitovuwexayozabecodifugahijulamenopuqiresutivowu"[i:i + 2]
                  for i in range(0, 60, 2))
CORPUS = Corpus(SYLLABLES, seed=11, query_pool=300)
TENANT, USER_ID = "bench", "u1"
PRINCIPAL = Principal("svc:bench", PrincipalKind.SERVICE, TENANT, permissions=frozenset(
    {Permission.READ, Permission.WRITE, Permission.DELETE}))
SCOPE = Scope(TENANT, project_id="p", user_id=USER_ID)
DIMENSION = 64
OPERATIONS = ("add", "get", "search", "update", "delete")
WARMUP = 20
GOVERNED = tuple(f"gm-{backend}-{mode}" for backend in ("memory", "sqlite", "postgres")
                 for mode in ("lexical", "hybrid"))
SYSTEMS = ("fts5", "langgraph-sqlite", "langgraph-sqlite-vec", "mem0", *GOVERNED,
           "native-sqlite")
BASELINE, FLOOR = "langgraph-sqlite", "fts5"


class Skip(Exception):
    """The system cannot run here (a missing package or interpreter feature)."""


def hashing_embedder() -> Any:
    from governed_memory_embedders.config import HashingConfig
    from governed_memory_embedders.hashing import HashingEmbedder

    return HashingEmbedder(HashingConfig(dimension=DIMENSION))


def files_size(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        for suffix in ("", "-wal", "-journal"):
            candidate = Path(f"{path}{suffix}")
            if candidate.exists():
                total += candidate.stat().st_size
    return total


class System:
    """One system under test; subclasses fill in the six calls. ``files`` are the
    store's database files (for bytes per search); ``backend`` exposes commit
    counters when the system has them."""

    name = ""
    note = ""
    files: list[Path]
    backend: Any = None
    started = False

    async def open(self, base: Path) -> None: ...
    async def seed(self, texts: list[str]) -> list[str]: ...
    async def add(self, text: str) -> str: ...
    async def get(self, record_id: str) -> Any: ...
    async def search(self, query: str) -> int: ...
    async def update(self, record_id: str, text: str) -> Any: ...
    async def delete(self, record_id: str) -> Any: ...
    async def close(self) -> None: ...


class Fts5(System):
    note = "raw sqlite3, WAL, synchronous=FULL, FTS5 bm25, sync calls"

    async def open(self, base: Path) -> None:
        self.files = [base / "fts5.db"]
        self.db = sqlite3.connect(self.files[0], isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE memories (rid INTEGER PRIMARY KEY, id TEXT UNIQUE "
                        "NOT NULL, user_id TEXT NOT NULL, content TEXT NOT NULL, "
                        "updated_at REAL NOT NULL)")
        self.db.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(content)")

    def _insert(self, text: str) -> str:
        record_id = uuid.uuid4().hex
        cursor = self.db.execute(
            "INSERT INTO memories (id, user_id, content, updated_at) VALUES (?, ?, ?, ?)",
            (record_id, USER_ID, text, time.time()))
        self.db.execute("INSERT INTO memories_fts (rowid, content) VALUES (?, ?)",
                        (cursor.lastrowid, text))
        return record_id

    async def seed(self, texts: list[str]) -> list[str]:
        self.db.execute("BEGIN")
        ids = [self._insert(text) for text in texts]
        self.db.execute("COMMIT")
        return ids

    async def add(self, text: str) -> str:
        self.db.execute("BEGIN")
        record_id = self._insert(text)
        self.db.execute("COMMIT")
        return record_id

    async def get(self, record_id: str) -> Any:
        return self.db.execute("SELECT id, content, updated_at FROM memories WHERE id = ? "
                               "AND user_id = ?", (record_id, USER_ID)).fetchone()

    async def search(self, query: str) -> int:
        match = " OR ".join(f'"{word}"' for word in query.split())
        rows = self.db.execute(
            "SELECT m.id, m.content, bm25(memories_fts) AS score FROM memories_fts "
            "JOIN memories m ON m.rid = memories_fts.rowid WHERE memories_fts MATCH ? "
            "AND m.user_id = ? ORDER BY score LIMIT 10", (match, USER_ID)).fetchall()
        return len(rows)

    async def update(self, record_id: str, text: str) -> Any:
        self.db.execute("BEGIN")
        (rid,) = self.db.execute("SELECT rid FROM memories WHERE id = ?",
                                 (record_id,)).fetchone()
        self.db.execute("UPDATE memories SET content = ?, updated_at = ? WHERE rid = ?",
                        (text, time.time(), rid))
        self.db.execute("UPDATE memories_fts SET content = ? WHERE rowid = ?", (text, rid))
        self.db.execute("COMMIT")

    async def delete(self, record_id: str) -> Any:
        self.db.execute("BEGIN")
        (rid,) = self.db.execute("SELECT rid FROM memories WHERE id = ?",
                                 (record_id,)).fetchone()
        self.db.execute("DELETE FROM memories WHERE rid = ?", (rid,))
        self.db.execute("DELETE FROM memories_fts WHERE rowid = ?", (rid,))
        self.db.execute("COMMIT")

    async def close(self) -> None:
        self.db.close()


class LangGraphSqlite(System):
    note = ("langgraph-checkpoint-sqlite SqliteStore as shipped (rollback journal, "
            "synchronous=FULL), sync calls; no index: search ignores the query and lists "
            "the namespace")
    with_vectors = False

    async def open(self, base: Path) -> None:
        try:
            from langgraph.store.sqlite import SqliteStore
        except ImportError:
            raise Skip("langgraph-checkpoint-sqlite is not installed "
                       "(pip install 'governed-memory[bench]')") from None
        self.files = [base / "langgraph.db"]
        index = None
        driver: Any = sqlite3
        if self.with_vectors:
            driver = extension_driver()
            embedder = hashing_embedder()
            index = {"dims": DIMENSION, "fields": ["content"],
                     "embed": lambda texts: [list(v) for v in embedder.embed_sync(texts)]}
            self.note += f" (SQLite {driver.sqlite_version} via {driver.__name__})"
        # What SqliteStore.from_conn_string opens, with the driver that can load sqlite-vec.
        self.conn = driver.connect(str(self.files[0]), check_same_thread=False,
                                   isolation_level=None)
        self.store = SqliteStore(self.conn, index=index)  # type: ignore[arg-type]
        self.store.setup()
        self.namespace = (TENANT, USER_ID)

    async def seed(self, texts: list[str]) -> list[str]:
        from langgraph.store.base import PutOp

        ids = [uuid.uuid4().hex for _ in texts]
        for start in range(0, len(texts), 1000):
            self.store.batch([PutOp(self.namespace, key, {"content": text})
                              for key, text in zip(ids[start:start + 1000],
                                                   texts[start:start + 1000], strict=True)])
        return ids

    async def add(self, text: str) -> str:
        key = uuid.uuid4().hex
        self.store.put(self.namespace, key, {"content": text})
        return key

    async def get(self, record_id: str) -> Any:
        return self.store.get(self.namespace, record_id)

    async def search(self, query: str) -> int:
        return len(self.store.search(self.namespace, query=query, limit=10))

    async def update(self, record_id: str, text: str) -> Any:
        self.store.put(self.namespace, record_id, {"content": text})

    async def delete(self, record_id: str) -> Any:
        self.store.delete(self.namespace, record_id)

    async def close(self) -> None:
        self.conn.close()


def extension_driver() -> Any:
    """A DB-API sqlite3 module whose connections can load sqlite-vec: the standard
    library's when this Python was built with extension loading, else ``pysqlite3``
    (the ``pysqlite3-binary`` wheel in the ``bench`` extra, its own bundled SQLite)."""
    try:
        import sqlite_vec  # noqa: F401
    except ImportError:
        raise Skip("sqlite-vec is not installed (pip install 'governed-memory[bench]')") from None
    if hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        return sqlite3
    try:
        import pysqlite3.dbapi2 as driver
    except ImportError:
        raise Skip("this Python's sqlite3 cannot load extensions and pysqlite3-binary is "
                   "not installed") from None
    return driver


class LangGraphSqliteVec(LangGraphSqlite):
    note = "SqliteStore with a sqlite-vec index (64-d hashing embedder), sync calls"
    with_vectors = True


class InlineHashing:
    """What mem0 calls to embed: the governed hashing embedder, computed inline."""

    def __init__(self) -> None:
        self.embedder = hashing_embedder()

    def embed(self, text: str, memory_action: Any = None) -> list[float]:
        return list(self.embedder.embed_sync([text])[0])

    def embed_batch(self, texts: list[str], memory_action: Any = "add") -> list[list[float]]:
        return [list(vector) for vector in self.embedder.embed_sync(texts)]


class Mem0(System):
    note = ("mem0ai Memory, Qdrant :memory:, infer=False, 64-d hashing embedder inline, "
            "history in SQLite, sync calls; seeded one add at a time (no batch write)")

    async def open(self, base: Path) -> None:
        try:
            from governed_memory_mem0 import build_mem0_provider
        except ImportError:
            raise Skip("mem0ai is not installed") from None
        os.environ.setdefault("MEM0_DIR", str(base / "mem0-home"))
        self.files = [base / "mem0-history.db"]
        self.provider = build_mem0_provider({
            "client": "local", "ledger_path": str(base / "mem0-ledger.db"),
            "vector_store": {"provider": "qdrant", "path": ":memory:"},
            "history_db_path": str(self.files[0]), "mem0_dir": str(base / "mem0-home"),
            "embedder": {"name": "hashing", "dimension": DIMENSION},
        }, SystemClock(), embedder=hashing_embedder())
        await self.provider.start()
        self.memory = self.provider.client.memory  # type: ignore[attr-defined]
        self.memory.embedding_model = InlineHashing()

    async def seed(self, texts: list[str]) -> list[str]:
        return [await self.add(text) for text in texts]

    async def add(self, text: str) -> str:
        result = self.memory.add([{"role": "user", "content": text}], user_id=USER_ID,
                                 infer=False)
        return str(result["results"][0]["id"])

    async def get(self, record_id: str) -> Any:
        return self.memory.get(record_id)

    async def search(self, query: str) -> int:
        found = self.memory.search(query, filters={"user_id": USER_ID}, top_k=10)
        return len(found["results"])

    async def update(self, record_id: str, text: str) -> Any:
        return self.memory.update(record_id, text)

    async def delete(self, record_id: str) -> Any:
        return self.memory.delete(record_id)

    async def close(self) -> None:
        await self.provider.close()


def hybrid_profile(config: dict[str, Any]) -> Any:
    from governed_memory.profiles import parse_profile

    return parse_profile({
        "id": "peers-bench-hybrid", "version": "1.0.0",
        "provider": {"name": "native", "config": config},
        "stores": {"embedder": {"kind": "hashing", "config": {"dimension": DIMENSION}}},
        "indexing": {"mode": "sync"},
        "retrieval": {"modes": ["lexical", "vector"], "top_k": 10},
    })


async def seed_closed(config: dict[str, Any], texts: list[str], embedder: Any) -> list[str]:
    """Seed a durable store through a provider of its own, closed before the system under
    test opens the store."""
    from governed_memory_native import build_native_provider

    provider = build_native_provider(config, SystemClock())
    await provider.start()
    try:
        return await seed_texts(provider.backend, SCOPE, texts, embedder=embedder)
    finally:
        await provider.close()


class Governed(System):
    def __init__(self, backend: str, mode: str) -> None:
        self.kind, self.mode = backend, mode
        self.note = (f"GovernedMemoryManager, native {backend}, {mode}"
                     + (", hashing/64 embedded on write" if mode == "hybrid" else ""))

    async def open(self, base: Path) -> None:
        if self.kind == "postgres":
            try:
                import psycopg  # noqa: F401
            except ImportError:
                raise Skip("psycopg is not installed") from None
        self.stack = ExitStack()
        self.config = self.stack.enter_context(storage(self.kind))
        self.files = [Path(self.config["path"])] if "path" in self.config else []
        self.manager = (GovernedMemoryManager.from_profile(hybrid_profile(self.config))
                        if self.mode == "hybrid"
                        else GovernedMemoryManager.from_plugins("native", self.config))

    async def seed(self, texts: list[str]) -> list[str]:
        """A durable store is seeded before the manager opens it, as an application finds
        it (indexes built on open see every record); the memory backend only lives inside
        the open provider, so it is seeded through the started manager's backend."""
        embedder = hashing_embedder() if self.mode == "hybrid" else None
        ids = None
        if self.kind != "memory":
            ids = await seed_closed(self.config, texts, embedder)
        await self.manager.start()
        self.started = True
        # Seeding writes storage below governance, as bench/seeding.py does for files.
        self.backend = self.manager._provider.backend  # type: ignore[attr-defined]
        if ids is None:
            ids = await seed_texts(self.backend, SCOPE, texts, embedder=embedder)
        return ids

    async def add(self, text: str) -> str:
        return (await self.manager.add(PRINCIPAL, SCOPE, text)).id

    async def get(self, record_id: str) -> Any:
        return await self.manager.get(PRINCIPAL, SCOPE, record_id)

    async def search(self, query: str) -> int:
        return len((await self.manager.search(PRINCIPAL, SCOPE, query, limit=10)).hits)

    async def update(self, record_id: str, text: str) -> Any:
        return await self.manager.update(PRINCIPAL, SCOPE, record_id, content=text)

    async def delete(self, record_id: str) -> Any:
        return await self.manager.delete(PRINCIPAL, SCOPE, record_id)

    async def close(self) -> None:
        try:
            if self.started:
                await self.manager.close()
        finally:
            self.stack.close()


class NativeDirect(System):
    note = "native provider on SQLite called directly: no manager, policy or events"

    async def open(self, base: Path) -> None:
        from governed_memory_native import build_native_provider

        self.files = [base / "native.db"]
        self.clock = SystemClock()
        self.config = {"backend": "sqlite", "path": str(self.files[0])}
        self.provider = build_native_provider(self.config, self.clock)

    def ctx(self) -> OperationContext:
        return OperationContext(operation_id="op_bench", principal=PRINCIPAL, now=self.clock.now())

    async def seed(self, texts: list[str]) -> list[str]:
        ids = await seed_closed(self.config, texts, None)
        await self.provider.start()
        self.started = True
        self.backend = self.provider.backend
        return ids

    async def add(self, text: str) -> str:
        return (await self.provider.add(AddRequest(scope=SCOPE, content=text), self.ctx())).id

    async def get(self, record_id: str) -> Any:
        return await self.provider.get(GetRequest(scope=SCOPE, record_id=record_id), self.ctx())

    async def search(self, query: str) -> int:
        result = await self.provider.search(SearchRequest(scopes=(SCOPE,), query=query, limit=10),
                                            self.ctx())
        return len(result.hits)

    async def update(self, record_id: str, text: str) -> Any:
        return await self.provider.update(
            UpdateRequest(scope=SCOPE, record_id=record_id, content=text), self.ctx())

    async def delete(self, record_id: str) -> Any:
        return await self.provider.delete(DeleteRequest(scope=SCOPE, record_id=record_id),
                                          self.ctx())

    async def close(self) -> None:
        if self.started:
            await self.provider.close()


def build(name: str) -> System:
    factories: dict[str, Callable[[], System]] = {
        "fts5": Fts5, "langgraph-sqlite": LangGraphSqlite,
        "langgraph-sqlite-vec": LangGraphSqliteVec, "mem0": Mem0,
        "native-sqlite": NativeDirect,
    }
    if name in factories:
        system = factories[name]()
    else:
        _, backend, mode = name.split("-")
        system = Governed(backend, mode)
    system.name = name
    return system


def counters(backend: Any) -> dict[str, float] | None:
    """The backend's numeric ``stats`` counters (``hops``, ``commits``, ``reads``,
    ``writes``, ...), if it keeps any: ``backend.stats.as_dict()`` when the backend has
    it, an attrs value, a mapping or plain attributes otherwise; ``None`` when absent."""
    stats = getattr(backend, "stats", None)
    if stats is None:
        return None
    if callable(stats):
        stats = stats()
    as_dict = getattr(stats, "as_dict", None)
    if callable(as_dict):
        stats = as_dict()
    elif hasattr(stats, "__attrs_attrs__"):
        import attrs

        stats = attrs.asdict(stats)
    elif not isinstance(stats, dict):
        stats = {key: getattr(stats, key) for key in dir(stats) if not key.startswith("_")}
    return {key: value for key, value in stats.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}


async def search_burst(system: System, queries: list[str]) -> dict[str, Any]:
    """Searches back to back with a 1 ms ticker alongside: loop lag, bytes, commits."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            began = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(max(0.0, time.perf_counter() - began - 0.001))

    size_before = files_size(system.files)
    stats_before = counters(system.backend)
    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.002)
    for query in queries:
        await system.search(query)
        await asyncio.sleep(0)  # a synchronous peer never yields otherwise
    stop.set()
    await task
    size_after = files_size(system.files)
    stats_after = counters(system.backend)
    extra: dict[str, Any] = {
        "lag_max_ms": round(max(lags, default=0.0) * 1000, 2),
        "lag_p99_ms": round(quantile(lags, 0.99) * 1000, 2) if lags else 0.0,
        "bytes_per_search": (round((size_after - size_before) / len(queries), 1)
                             if system.files else None),
        "stats_delta_per_search": None,
    }
    if stats_before is not None and stats_after is not None:
        extra["stats_delta_per_search"] = {
            key: round((stats_after[key] - stats_before.get(key, 0)) / len(queries), 3)
            for key in stats_after}
    return extra


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def worker(name: str, records: int, ops: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    system = build(name)
    with tempfile.TemporaryDirectory(prefix="gm-peers-") as tmp:
        try:
            await system.open(Path(tmp))
        except Skip as skip:
            return {"system": name, "skipped": str(skip)}
        try:
            texts = [CORPUS.sentence(rng) for _ in range(records)]
            began = time.perf_counter()
            ids = await system.seed(texts)
            seed_seconds = time.perf_counter() - began
            samples: dict[str, list[int]] = {op: [] for op in OPERATIONS}
            hits: list[int] = []
            for i in range(WARMUP + ops):
                text, query = CORPUS.sentence(rng), CORPUS.query_text(rng)
                target, other = rng.choice(ids), CORPUS.sentence(rng)
                timed: dict[str, int] = {}
                start = time.perf_counter_ns()
                new_id = await system.add(text)
                timed["add"] = time.perf_counter_ns() - start
                start = time.perf_counter_ns()
                await system.get(target)
                timed["get"] = time.perf_counter_ns() - start
                start = time.perf_counter_ns()
                found = await system.search(query)
                timed["search"] = time.perf_counter_ns() - start
                start = time.perf_counter_ns()
                await system.update(target, other)
                timed["update"] = time.perf_counter_ns() - start
                start = time.perf_counter_ns()
                await system.delete(new_id)
                timed["delete"] = time.perf_counter_ns() - start
                if i >= WARMUP:
                    for op, value in timed.items():
                        samples[op].append(value)
                    hits.append(found)
            burst = await search_burst(system, [CORPUS.query_text(rng) for _ in range(ops)])
        finally:
            await system.close()
    return {"system": name, "note": system.note, "seed_seconds": round(seed_seconds, 2),
            "samples_ns": samples, "mean_hits": round(statistics.fmean(hits), 2), **burst}


def run_worker(name: str, args: argparse.Namespace, round_: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", name,
               "--records", str(args.records), "--ops", str(args.ops),
               "--seed", str(1000 + round_)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"system": name, "failed": f"timed out after {args.timeout}s",
                "load_before": load_before, "load_after": os.getloadavg()[0]}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        result: dict[str, Any] = {"system": name, "failed": " | ".join(tail)}
    else:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(load_before=load_before, load_after=os.getloadavg()[0], round=round_)
    return result


def us(values_ns: list[int], q: float) -> float:
    return round(quantile([float(v) for v in values_ns], q) / 1000, 1)


def summarise(runs: list[dict[str, Any]], systems: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in systems:
        mine = [run for run in runs if run["system"] == name]
        ok = [run for run in mine if "samples_ns" in run]
        if not ok:
            failed = next((run["failed"] for run in mine if "failed" in run), None)
            skipped = next((run["skipped"] for run in mine if "skipped" in run), "no run")
            results[name] = {"failed": failed} if failed else {"skipped": skipped}
            continue
        row: dict[str, Any] = {"note": ok[0]["note"], "rounds": len(ok), "ops": {}}
        for op in OPERATIONS:
            pooled = [v for run in ok for v in run["samples_ns"][op]]
            row["ops"][op] = {
                "median_us": us(pooled, 0.5), "p95_us": us(pooled, 0.95),
                "samples": len(pooled),
                "round_medians_us": [us(run["samples_ns"][op], 0.5) for run in ok]}
        for key in ("lag_max_ms", "lag_p99_ms", "bytes_per_search", "mean_hits"):
            values = [run[key] for run in ok if run.get(key) is not None]
            row[key] = round(statistics.median(values), 2) if values else None
        row["seed_seconds"] = round(statistics.median(run["seed_seconds"] for run in ok), 2)
        row["stats_delta_per_search"] = ok[-1].get("stats_delta_per_search")
        results[name] = row
    for row in results.values():
        if "ops" not in row:
            continue
        for ref, key in ((BASELINE, "vs_sqlitestore"), (FLOOR, "vs_fts5")):
            base = results.get(ref, {}).get("ops")
            row[key] = ({op: round(row["ops"][op]["median_us"] / base[op]["median_us"], 2)
                         for op in OPERATIONS} if base else None)
    return results


TARGETS = (  # (label, system, op, reference key, bound): the ratio targets
    ("governed SQLite add ÷ SqliteStore", "gm-sqlite-lexical", "add", "vs_sqlitestore", 0.5),
    ("governed SQLite update ÷ SqliteStore", "gm-sqlite-lexical", "update", "vs_sqlitestore",
     0.5),
    ("governed SQLite delete ÷ SqliteStore", "gm-sqlite-lexical", "delete", "vs_sqlitestore",
     0.5),
    ("governed SQLite get ÷ SqliteStore", "gm-sqlite-lexical", "get", "vs_sqlitestore", 4.0),
    ("provider alone get ÷ SqliteStore", "native-sqlite", "get", "vs_sqlitestore", 2.0),
    ("governed lexical search ÷ raw FTS5", "gm-sqlite-lexical", "search", "vs_fts5", 1.2),
)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for label, name, op, key, bound in TARGETS:
        ratio = (results.get(name, {}).get(key) or {}).get(op)
        rows.append({"target": label, "bound": bound, "ratio": ratio,
                     "met": None if ratio is None else ratio <= bound})
    return rows


def markdown(data: dict[str, Any]) -> str:
    meta, results = data["meta"], data["results"]
    lines = [
        "# Governed memory against its peers: one user, one workload",
        "",
        f"{meta['records']:,} memories of one user (12-word sentences, Zipf vocabulary of "
        f"{len(CORPUS.words):,} words), then {meta['ops']} timed iterations of add, get, "
        "search (2-word query, top 10), update, delete per round; "
        f"{meta['rounds']} round(s), each system in a fresh subprocess, rounds interleaved. "
        f"Python {meta['python']}, SQLite {meta['sqlite']}, {meta['machine']}, "
        f"{meta['when']}. 1-minute load average during the runs: {meta['load_min']} to "
        f"{meta['load_max']} (machine shared with other jobs: compare ratios, not "
        "absolute figures). See the docstring of `bench/peers.py` for what each system is.",
        "",
        "## Median (p95) µs per call",
        "",
        "| system | " + " | ".join(OPERATIONS) + " | mean hits |",
        "|---|" + "---:|" * (len(OPERATIONS) + 1),
    ]
    skipped = []
    for name, row in results.items():
        if "ops" not in row:
            state = "FAILED" if "failed" in row else "skipped"
            skipped.append(f"- `{name}`: {state} ({row.get('failed') or row['skipped']})")
            continue
        cells = [f"{row['ops'][op]['median_us']} ({row['ops'][op]['p95_us']})"
                 for op in OPERATIONS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {row['mean_hits']} |")
    for key, label in (("vs_sqlitestore", "÷ LangGraph SqliteStore (medians)"),
                       ("vs_fts5", "÷ raw FTS5 (medians)")):
        lines += ["", f"## {label}", "", "| system | " + " | ".join(OPERATIONS) + " |",
                  "|---|" + "---:|" * len(OPERATIONS)]
        for name, row in results.items():
            if row.get(key):
                lines.append(f"| {name} | " + " | ".join(
                    str(row[key][op]) for op in OPERATIONS) + " |")
    lines += ["", "## The issue's targets", "", "| target | bound | ratio | met |",
              "|---|---:|---:|---|"]
    for row in data["targets"]:
        met = "n/a" if row["met"] is None else ("yes" if row["met"] else "no")
        lines.append(f"| {row['target']} | ≤ {row['bound']} | {row['ratio']} | {met} |")
    lines += ["", "## Search burst: event-loop lag, bytes and commits per search", "",
              "| system | lag max ms | lag p99 ms | bytes/search | commits/search "
              "| seed s |", "|---|---:|---:|---:|---|---:|"]
    for name, row in results.items():
        if "ops" not in row:
            continue
        delta = row.get("stats_delta_per_search")
        stats = ("n/a" if delta is None else
                 ", ".join(f"{k} {v}" for k, v in sorted(delta.items())) or "none")
        size = "n/a" if row["bytes_per_search"] is None else row["bytes_per_search"]
        lines.append(f"| {name} | {row['lag_max_ms']} | {row['lag_p99_ms']} | {size} | "
                     f"{stats} | {row['seed_seconds']} |")
    lines += ["", "Notes:", "",
              "- `langgraph-sqlite` search has no index configured, so it ignores the query "
              "and returns the first 10 items of the namespace (a listing, not a search).",
              "- Synchronous peers (`fts5`, `langgraph-*`, `mem0`) are called on the event "
              "loop: their lag is the length of a call. Governed systems are async.",
              "- Seeding is outside the timings; `seed s` is how long it took (mem0 has no "
              "batch write, so it pays one add per memory)."]
    lines += [f"- `{name}`: {row['note']}" for name, row in results.items() if "note" in row]
    lines += skipped
    lines += ["", f"Reproduce: `{meta['command']}`"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--out", type=Path, default=RESULTS / "peers",
                        help="path stem: writes <out>.json and <out>.md")
    parser.add_argument("--quick", action="store_true",
                        help="50 records, 20 ops, 1 round, 300 s timeout: a smoke run")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds one (system, round) run may take")
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = asyncio.run(worker(args.worker, args.records, args.ops, args.seed))
        print(json.dumps(result))
        return
    if args.quick:
        args.records, args.ops, args.rounds = 50, 20, 1
        args.timeout = min(args.timeout, 300.0)
    runs: list[dict[str, Any]] = []
    for round_ in range(1, args.rounds + 1):
        for name in args.systems:
            run = run_worker(name, args, round_)
            state = run.get("skipped") or run.get("failed") or "ok"
            print(f"round {round_} {name}: {state} (load {run['load_before']:.2f} → "
                  f"{run['load_after']:.2f})", file=sys.stderr, flush=True)
            runs.append(run)
    loads = [run[key] for run in runs for key in ("load_before", "load_after")]
    results = summarise(runs, args.systems)
    data = {
        "meta": {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
                 "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                 "records": args.records, "ops": args.ops, "rounds": args.rounds,
                 "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "load_min": round(min(loads), 2), "load_max": round(max(loads), 2),
                 "command": "python bench/peers.py " + " ".join(sys.argv[1:])},
        "runs": [{key: value for key, value in run.items() if key != "samples_ns"}
                 for run in runs],
        "results": results,
    }
    data["targets"] = targets(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps(data, indent=2) + "\n")
    text = markdown(data)
    Path(f"{args.out}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
