"""``postgres-trail``: the hash-chained audit trail in PostgreSQL, for several processes
and nodes over one store.

The file trail (``governed_memory.audit.AuditSink``) chains events on one host's disk
under ``flock``. This sink keeps the same chain (same entry format and hash rules, same
Merkle tree) in a native PostgreSQL schema (:mod:`postgres.trail.schema`), so every
node records into one trail and any node can extend it:

- **Recording.** ``emit`` inserts the event's canonical bytes into ``audit_intake``
  and returns once the insert committed. Emits that arrive while an insert is in
  flight go together in the next one (one statement, one commit: group commit). A
  write's committed event needs no emit at all when the trail is in the provider's own
  store (``store = "provider"``): the provider stores it in ``event_outbox`` in the
  write's transaction, and a trigger copies it into the intake in that same
  transaction; the outbox dispatcher hands it to :meth:`emit_stored`, which only has
  to let the acknowledgement go ahead.
- **Durability without a file fsync.** An operation's *outcome* event (completed,
  rejected, failed, …) commits synchronously: it is on PostgreSQL's disk before the
  operation returns. A *requested* event in the provider's store commits without
  waiting for its WAL flush, because the next synchronous commit of the same
  operation (its write, or its outcome event) flushes the WAL up to itself, and so this
  event too, which precedes it: an operation never returns with its events not
  durable, and one the server lost in a crash returns nothing. A trail in another
  store commits everything synchronously (its flushes cannot cover the provider's).
- **Sequencing.** Every sink runs a sequencer (:mod:`postgres.trail.sequencer`) in the
  background; an advisory lock lets one batch run at a time across every node, and any
  node takes over when the holder dies. It runs every ``interval_s``, and early once
  this process recorded a full ``batch``: a batch commits synchronously (a checkpoint
  may be taken of it at once), so batches are kept large rather than frequent. A
  recorded event is durable in the intake already; its position only waits.

Fail closed: a sink that cannot reach the database raises ``MemoryUnavailableError``
from ``emit``, so a fail-closed profile refuses the operation. Nothing waits in
process memory that an acknowledged operation depends on: whatever ``emit`` returned
for is committed.

Configuration (``[audit.sinks.postgres-trail]``): ``store = "provider"`` (the native
provider's PostgreSQL dsn and schema; ``governed_memory.sinks.build_sinks`` fills in
the provider's config and the profile's event detail), or ``dsn`` and ``schema``;
``event_detail`` (``standard``, or ``minimal``: events taken from the outbox lose their
content hashes), ``batch`` (events per sequencing transaction), ``interval_s``,
``timeout_ms`` (waits for a connection or a lock), ``sequence`` (``false``: record
only, leave sequencing to other nodes).

Connections: two of its own per sink, one that records and one that sequences, each
opened on first use and again on the first use after it broke. No pool: a pool that
lost its connections backs off before it reconnects, while a trail must record again
the moment its database is back (a fail-closed manager refuses everything meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any, Final

import attrs
import psycopg
from governed_memory.audit.strict_json import canonical_bytes
from governed_memory.converter import unstructure
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryUnavailableError,
)
from governed_memory.events import MemoryEvent
from psycopg.rows import dict_row

from governed_memory_native.config import (
    DEFAULT_POSTGRES_SCHEMA,
    BackendKind,
    _check_schema,
    parse_config,
)
from governed_memory_native.postgres.schema import migrate
from governed_memory_native.postgres.trail.reader import PostgresStoredTrail, describe
from governed_memory_native.postgres.trail.sequencer import (
    BeforeCommit,
    Chain,
    enable,
    sequence_batch,
    sequencer_lock_key,
)

log = logging.getLogger(__name__)

Row = dict[str, Any]

SINK_NAME: Final = "postgres-trail"
DEFAULT_BATCH: Final = 500
MAX_BATCH: Final = 10_000
DEFAULT_INTERVAL_S: Final = 0.5
DEFAULT_TIMEOUT_MS: Final = 5_000
MAX_GROUP: Final = 1_000
"""Events per intake statement at most (a group under heavy load)."""
_REQUESTED: Final = ".requested"
_BACKOFF_MAX_S: Final = 5.0

# set_config(..., true) is in force for the statement's own (implicit) transaction only:
# whether its commit waits for the WAL flush. Arrays go in binary: the text form escapes
# every quote of a JSON body, in Python, at a cost above the round trip's.
_INSERT_ONE: Final = (
    "INSERT INTO audit_intake (event_id, body, stored) SELECT %s, %s, false"
    " FROM (SELECT set_config('synchronous_commit', %s, true)) AS setting"
    " ON CONFLICT (event_id) DO NOTHING")
_INSERT_MANY: Final = (
    "INSERT INTO audit_intake (event_id, body, stored)"
    " SELECT t.event_id, t.body, false"
    " FROM unnest(%b::text[], %b::text[]) WITH ORDINALITY AS t(event_id, body, n),"
    " (SELECT set_config('synchronous_commit', %s, true)) AS setting"
    " ORDER BY t.n ON CONFLICT (event_id) DO NOTHING")


@attrs.frozen(slots=True)
class TrailConfig:
    dsn: str = attrs.field(repr=False)
    """May hold a password: never in a repr or a message."""
    schema: str
    shares_store: bool = False
    """The provider's own store (``store = "provider"``): its outbox feeds the intake."""
    content_hashes: bool = True
    """Whether events taken from the outbox keep their content hashes."""
    batch: int = DEFAULT_BATCH
    interval_s: float = DEFAULT_INTERVAL_S
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    sequence: bool = True


_KEYS: Final = frozenset({"dsn", "schema", "provider", "provider_config", "event_detail",
                          "batch", "interval_s", "timeout_ms", "sequence"})


def parse_trail_config(config: Mapping[str, Any]) -> TrailConfig:
    """The sink's config, strictly: an unknown key, a wrong type or a store it cannot
    use is a ``MemoryConfigurationError`` naming the key."""
    if not isinstance(config, Mapping):
        raise MemoryConfigurationError(f"{SINK_NAME}: config must be a table")
    unknown = sorted(str(key) for key in config if key not in _KEYS)
    if unknown:
        raise MemoryConfigurationError(f"{SINK_NAME}: unknown config key(s) {unknown}; known: "
                                       f"{sorted(_KEYS | {'store'})}")
    if "provider" in config:
        if "dsn" in config or "schema" in config:
            raise MemoryConfigurationError(f"{SINK_NAME}: store = \"provider\" takes the "
                                           "provider's dsn and schema; give neither")
        dsn, schema = _provider_store(config.get("provider"), config.get("provider_config"))
        shares = True
    else:
        if "provider_config" in config:
            raise MemoryConfigurationError(f"{SINK_NAME}: provider_config comes with "
                                           "store = \"provider\" only")
        given_dsn = config.get("dsn")
        given_schema = config.get("schema", DEFAULT_POSTGRES_SCHEMA)
        if not isinstance(given_dsn, str) or not given_dsn.strip() or "\x00" in given_dsn:
            raise MemoryConfigurationError(f"{SINK_NAME}: needs store = \"provider\", or a "
                                           "dsn (a connection string) and a schema")
        try:
            _check_schema(given_schema)
        except MemoryConfigurationError as exc:
            raise MemoryConfigurationError(f"{SINK_NAME}: {exc}") from None
        assert isinstance(given_schema, str)
        dsn, schema, shares = given_dsn, given_schema, False
    detail = config.get("event_detail", "standard")
    if detail not in ("standard", "minimal"):
        raise MemoryConfigurationError(f"{SINK_NAME}: event_detail must be 'standard' or "
                                       "'minimal'")
    batch = _integer(config, "batch", DEFAULT_BATCH, 1, MAX_BATCH)
    timeout = _integer(config, "timeout_ms", DEFAULT_TIMEOUT_MS, 1, 600_000)
    interval = config.get("interval_s", DEFAULT_INTERVAL_S)
    if (isinstance(interval, bool) or not isinstance(interval, int | float)
            or not math.isfinite(interval) or not 0 < interval <= 3600):
        raise MemoryConfigurationError(f"{SINK_NAME}: interval_s must be seconds, more than "
                                       "0 and at most 3600")
    sequence = config.get("sequence", True)
    if not isinstance(sequence, bool):
        raise MemoryConfigurationError(f"{SINK_NAME}: sequence must be true or false")
    return TrailConfig(dsn, schema, shares, detail == "standard", batch, float(interval),
                       timeout, sequence)


def _provider_store(name: object, provider_config: object) -> tuple[str, str]:
    if name != "native" or not isinstance(provider_config, Mapping):
        raise MemoryConfigurationError(
            f"{SINK_NAME}: store = \"provider\" needs the native provider with the postgres "
            f"backend (the profile's provider is {name!r})")
    native = parse_config(provider_config)
    if native.backend is not BackendKind.POSTGRES or native.dsn is None:
        raise MemoryConfigurationError(
            f"{SINK_NAME}: store = \"provider\" needs the postgres backend (the provider's "
            f"is {native.backend.value}); the file trail ([audit] path) is the embedded "
            "default")
    return native.dsn, native.schema


def _integer(config: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryConfigurationError(f"{SINK_NAME}: {key} must be an integer from {low} "
                                       f"to {high}")
    return value


def postgres_trail_from_config(config: Mapping[str, Any]) -> PostgresTrailSink:
    """The ``postgres-trail`` event sink's factory (no I/O: it connects on first use)."""
    return PostgresTrailSink(parse_trail_config(config))


@attrs.define
class TrailStats:
    """What recording and sequencing cost, for benchmarks and tests (event loop only)."""

    emitted: int = 0
    """Events handed to ``emit`` and recorded."""
    statements: int = 0
    """Intake inserts sent: fewer than ``emitted`` when concurrent emits were grouped."""
    synchronous: int = 0
    """Of those, the ones that waited for their WAL flush."""
    batches: int = 0
    """Sequencing transactions this process committed."""
    sequenced: int = 0
    """Entries this process's batches appended."""


@attrs.frozen(slots=True)
class _Pending:
    event_id: str
    body: str
    synchronous: bool
    future: asyncio.Future[None]


def _retrieved(future: asyncio.Future[None]) -> None:
    """Take a pending emit's outcome, so one whose caller gave up (its result shielded)
    is not reported as an exception nobody retrieved."""
    if not future.cancelled():
        future.exception()


class _Link:
    """One connection of the sink's: opened on first use, and again on the first use
    after it broke (see the module docstring); one user at a time."""

    def __init__(self, config: TrailConfig, role: str) -> None:
        self._config = config
        self._role = role
        self._conn: psycopg.AsyncConnection[Row] | None = None
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def using(self, doing: str) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """The connection, for ``doing`` (named in errors); psycopg's errors become
        ``MemoryUnavailableError`` (no detail of the connection in them), and a
        connection that broke, or whose use was cancelled mid-statement, is dropped."""
        async with self._lock:
            try:
                conn = await self._connected()
                yield conn
            except psycopg.Error as exc:
                if isinstance(exc, psycopg.OperationalError) or self._broken():
                    await self._drop()
                raise MemoryUnavailableError(f"postgres trail: {doing} failed: "
                                             f"{type(exc).__name__}") from None
            except Exception:
                if self._broken():
                    await self._drop()
                raise
            except BaseException:
                await self._drop()  # cancelled mid-statement: its state is unknown
                raise

    def _broken(self) -> bool:
        return self._conn is None or self._conn.closed or self._conn.broken

    async def _connected(self) -> psycopg.AsyncConnection[Row]:
        if self._conn is not None and not self._broken():
            return self._conn
        await self._drop()
        config = self._config
        timeout = config.timeout_ms / 1000
        async with asyncio.timeout(timeout):
            self._conn = await psycopg.AsyncConnection.connect(
                config.dsn, autocommit=True, row_factory=dict_row,
                connect_timeout=max(2, math.ceil(timeout)),
                options=f"-c search_path={config.schema} -c lock_timeout={config.timeout_ms}ms",
                application_name=f"governed-memory-trail/{self._role}")
        return self._conn

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with suppress(psycopg.Error):
                await conn.close()

    async def close(self) -> None:
        async with self._lock:
            await self._drop()


class PostgresTrailSink:
    """Records events into a PostgreSQL trail and sequences it (module docstring)."""

    name = SINK_NAME

    def __init__(self, config: TrailConfig, *, before_commit: BeforeCommit | None = None
                 ) -> None:
        self.config = config
        self.before_commit = before_commit
        """See ``postgres_trail_sequencer.BeforeCommit``."""
        self.stats = TrailStats()
        self.chain: Chain | None = None
        self._key = sequencer_lock_key(config.schema)
        self._recorder = _Link(config, "record")
        self._sequencer_link = _Link(config, "sequence")
        self._opened = False
        self._open_lock = asyncio.Lock()
        self._queue: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._sequencer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._unsequenced = 0
        """Events this sink recorded since its sequencer last ran: a full batch of them
        wakes it early; otherwise it runs every ``interval_s``, so each batch's
        synchronous commit is shared by many events and never by one add."""
        self._closed = False

    @property
    def location(self) -> str:
        return describe(self.config.dsn, self.config.schema)

    # -- the sink protocol ---------------------------------------------------------------

    async def emit(self, event: MemoryEvent) -> None:
        """Record ``event``; returns once the insert committed (see the module docstring
        for which commits wait for their WAL flush)."""
        deferred = self.config.shares_store and event.type.endswith(_REQUESTED)
        await self._record(event, synchronous=not deferred)

    async def emit_stored(self, event: MemoryEvent) -> None:
        """An event the provider stored in its outbox: in the provider's own store the
        outbox trigger took it into the intake in the write's transaction (or the trail
        took the outbox's backlog when it was switched on), so there is nothing left to
        record; a trail elsewhere records it like ``emit``."""
        if self.config.shares_store:
            await self._ensure_open()
            return
        await self._record(event, synchronous=True)

    async def check(self) -> None:
        """A round trip to the trail's database (for readiness probes); raises
        ``MemoryUnavailableError`` when it cannot be reached."""
        await self._ensure_open()
        async with self._recorder.using("check") as conn:
            await conn.execute("SELECT 1 FROM audit_chain WHERE id = 1")

    async def close(self) -> None:
        """Record what is queued, stop the sequencer, give the waiting events their
        positions when this sink can (another node will otherwise), and disconnect."""
        self._closed = True
        flusher = self._flusher
        if flusher is not None:
            await asyncio.gather(flusher, return_exceptions=True)
        task, self._sequencer = self._sequencer, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        try:
            if self._opened and self.config.sequence:
                async with asyncio.timeout(self._timeout_s):
                    await self._sequence_all()
        except Exception as exc:  # another node sequences what is left
            log.warning("postgres trail: the last sequencing pass at close failed: %s",
                        type(exc).__name__)
        finally:
            await self._recorder.close()
            await self._sequencer_link.close()

    # -- recording ------------------------------------------------------------------------

    async def _record(self, event: MemoryEvent, *, synchronous: bool) -> None:
        await self._ensure_open()
        body = canonical_bytes(unstructure(event)).decode("ascii")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self._queue.append(_Pending(event.event_id, body, synchronous, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(),
                                                name="governed-memory-trail-intake")
        # A cancelled caller does not take its event back: it keeps its place.
        await asyncio.shield(future)

    async def _flush(self) -> None:
        """Insert what is queued, a group per statement, until nothing is: emits that
        arrive while a statement is in flight go together in the next."""
        while self._queue:
            group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
            try:
                await self._insert(group)
            except Exception as exc:
                failure = (exc if isinstance(exc, GovernedMemoryError)
                           else MemoryUnavailableError(f"postgres trail: could not record "
                                                       f"{len(group)} event(s): "
                                                       f"{type(exc).__name__}"))
                for pending in group:
                    if not pending.future.done():
                        pending.future.set_exception(failure)
                continue
            except BaseException:
                for pending in group + self._queue:
                    if not pending.future.done():
                        pending.future.set_exception(
                            MemoryUnavailableError("postgres trail: recording was cancelled"))
                self._queue = []
                raise
            self.stats.emitted += len(group)
            for pending in group:
                if not pending.future.done():
                    pending.future.set_result(None)
            self._unsequenced += len(group)
            if self._unsequenced >= self.config.batch:
                self._wake.set()

    async def _insert(self, group: list[_Pending]) -> None:
        synchronous = any(pending.synchronous for pending in group)
        setting = "on" if synchronous else "off"
        async with self._recorder.using("record") as conn:
            if len(group) == 1:
                await conn.execute(_INSERT_ONE, (group[0].event_id, group[0].body, setting))
            else:
                await conn.execute(_INSERT_MANY, ([p.event_id for p in group],
                                                  [p.body for p in group], setting))
        self.stats.statements += 1
        self.stats.synchronous += synchronous

    # -- sequencing -----------------------------------------------------------------------

    async def sequence(self) -> int:
        """Give every waiting event its position now (until none waits, or another
        node's sequencer holds the lock); returns how many entries were appended."""
        await self._ensure_open()
        return await self._sequence_all()

    async def _sequence_all(self) -> int:
        appended = 0
        while True:
            async with self._sequencer_link.using("sequencing") as conn:
                batch = await sequence_batch(conn, key=self._key, limit=self.config.batch,
                                             before_commit=self.before_commit)
            if batch is None:
                return appended
            self.stats.batches += 1
            self.stats.sequenced += batch.appended
            appended += batch.appended
            if batch.taken < self.config.batch:
                return appended

    async def _sequence_forever(self) -> None:
        failures = 0
        while True:
            try:
                async with asyncio.timeout(self.config.interval_s):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            self._unsequenced = 0
            try:
                await self._sequence_all()
                failures = 0
            except Exception as exc:  # the loop outlives any one failure
                failures += 1
                log.error("postgres trail: sequencing failed (%s); retrying",
                          exc if isinstance(exc, GovernedMemoryError) else type(exc).__name__)
                await asyncio.sleep(min(self.config.interval_s * 2 ** failures,
                                        _BACKOFF_MAX_S))

    # -- opening ----------------------------------------------------------------------------

    @property
    def _timeout_s(self) -> float:
        return self.config.timeout_ms / 1000

    async def _ensure_open(self) -> None:
        """Bring the schema up to date and switch the trail on (once per sink); a
        failure is raised to the caller and the next call tries again."""
        if self._opened:
            return
        async with self._open_lock:
            if self._opened:
                return
            if self._closed:
                raise MemoryUnavailableError("postgres trail: the sink is closed")
            config = self.config
            async with self._recorder.using("opening the trail") as conn:
                await migrate(conn, config.schema, applied_at=time.time())
                self.chain = await enable(conn, config.schema,
                                          content_hashes=config.content_hashes)
            self._opened = True
            if config.sequence:
                self._sequencer = asyncio.create_task(self._sequence_forever(),
                                                      name="governed-memory-trail-sequencer")

    # -- reading ---------------------------------------------------------------------------

    def stored_trail(self) -> PostgresStoredTrail:
        """The trail for the audit tools (synchronous, read-only, one snapshot)."""
        return PostgresStoredTrail(self.config.dsn, self.config.schema,
                                   timeout_s=self._timeout_s)
