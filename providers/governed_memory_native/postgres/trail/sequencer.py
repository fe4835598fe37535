"""The audit trail's sequencer: positions, the hash chain and the Merkle tree, in
PostgreSQL, one sequencer at a time.

Recording an event (a sink's ``emit``, or the outbox trigger in a write's own
transaction) only puts it in ``audit_intake``; a *sequencer* then gives it its place.
Every node's ``postgres-trail`` sink runs one, and they take turns through a
transaction-scoped advisory lock (:func:`sequencer_lock_key`): a batch runs only while
its transaction holds the lock, so two batches never interleave, and a sequencer that
dies (its process killed, its node gone, its connection cut) loses the lock with its
transaction, whose work rolls back as a whole. Whichever node tries next takes over
exactly where the last committed batch left the chain: everything a batch needs is in
the database, nothing in a process.

One batch, in one transaction, under the lock:

1. the oldest waiting events (``audit_intake`` by ``id``, at most ``limit``; none: the
   batch ends having written nothing);
2. the chain's row (``audit_chain``: entries, head hash, Merkle frontier), locked;
3. those whose ``event_id`` already has a position are dropped (delivery is at least
   once: a redelivery, or a committed event that reached both the trigger and a sink);
4. each other event is read strictly (``audit.strict_json``: an intake row that is not
   one JSON object with its ``event_id`` stops the sequencer rather than be chained) and
   appended exactly as the file trail appends it: its canonical bytes ``E``, the hash
   ``H(n) = sha256(0x01 || H(n-1) || E)``, and the Merkle leaf ``sha256(0x00 || E)``
   folded into the frontier (``audit.merkle.Frontier``);
5. the entries inserted, the intake rows deleted, the chain's row updated; COMMIT.

``audit_entries.event_id`` is unique and positions are the primary key, so even a
sequencer that somehow ran without the lock could not record an event twice or two
events at one position: its batch would fail and roll back.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs
from governed_memory.audit.chain import entry_hash, genesis_hash
from governed_memory.audit.merkle import Frontier
from governed_memory.audit.proofs import leaf_hash
from governed_memory.audit.strict_json import JsonDocumentError, canonical_bytes, read_json
from governed_memory.errors import MemoryConfigurationError, MemoryStorageError
from psycopg import AsyncConnection

from governed_memory_native.postgres.locks import writer_lock_key

Row = dict[str, Any]
BeforeCommit = Callable[[int], Awaitable[None]]
"""Called inside a batch's transaction, before COMMIT, with the entries it appends
(tests stop a sequencer there to kill it mid-batch)."""

_LOCK_DOMAIN: Final = b"governed-memory/audit-sequencer/"


def sequencer_lock_key(schema: str) -> int:
    """The advisory lock key of the trail's sequencer on ``schema`` (a bigint): one
    batch at a time per trail, across every process and node."""
    return int.from_bytes(hashlib.sha256(_LOCK_DOMAIN + schema.encode()).digest()[:8], "big",
                          signed=True)


class TrailIntakeError(MemoryStorageError):
    """A waiting row that is not an event this trail's writers record: the sequencer
    stops at it instead of chaining it (someone wrote to the intake by hand)."""

    code = "audit_chain"


@attrs.frozen(slots=True)
class Batch:
    taken: int
    """Intake rows consumed."""
    appended: int
    """Entries the chain grew by (``taken`` less the events it already held)."""


@attrs.frozen(slots=True)
class Chain:
    chain_id: str
    created_at: float
    genesis: str
    stored_content_hashes: bool


async def enable(conn: AsyncConnection[Row], schema: str, *, content_hashes: bool,
                 now: float | None = None) -> Chain:
    """Switch the trail on for ``schema`` if it is not yet (one chain, with a fresh id
    and genesis), and return it.

    Switching on runs under the schema's writer lock held exclusively, so no write is
    in flight: every committed event a write stores in ``event_outbox`` from then on is
    taken into the intake by the trigger (it sees the chain's row), and every one stored
    before is copied now. ``content_hashes``: whether events taken from the outbox keep
    their content hashes (``False`` for a profile with minimal event detail). A trail
    that keeps them refuses a sink that may not see them."""
    chain = await _chain(conn)
    if chain is None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (writer_lock_key(schema),))
            chain = await _chain(conn)
            if chain is None:
                chain_id = "chain_" + uuid.uuid4().hex
                created_at = time.time() if now is None else now
                genesis = genesis_hash(chain_id, created_at)
                await conn.execute(
                    "INSERT INTO audit_chain (id, chain_id, created_at, genesis, entries, head,"
                    " frontier, stored_content_hashes) VALUES (1, %s, %s, %s, 0, %s, '', %s)",
                    (chain_id, created_at, genesis, genesis, content_hashes))
                await conn.execute(
                    "INSERT INTO audit_intake (event_id, body, stored)"
                    " SELECT event_id, body, true FROM event_outbox ORDER BY seq"
                    " ON CONFLICT (event_id) DO NOTHING")
                chain = Chain(chain_id, created_at, genesis, content_hashes)
    if chain.stored_content_hashes and not content_hashes:
        raise MemoryConfigurationError(
            f"postgres trail on schema {schema}: this trail keeps the content hashes of the "
            "events writes store, and a profile with minimal event detail may not have "
            "them recorded; give it a trail of its own (another schema)")
    return chain


async def _chain(conn: AsyncConnection[Row]) -> Chain | None:
    cursor = await conn.execute("SELECT chain_id, created_at, genesis, stored_content_hashes"
                                " FROM audit_chain WHERE id = 1")
    row = await cursor.fetchone()
    if row is None:
        return None
    return Chain(str(row["chain_id"]), float(row["created_at"]), str(row["genesis"]),
                 bool(row["stored_content_hashes"]))


async def sequence_batch(conn: AsyncConnection[Row], *, key: int, limit: int,
                         before_commit: BeforeCommit | None = None) -> Batch | None:
    """One batch (see the module docstring); ``None`` when another sequencer holds the
    lock. Raises :class:`TrailIntakeError` at an intake row that is no event."""
    async with conn.transaction():
        cursor = await conn.execute("SELECT pg_try_advisory_xact_lock(%s) AS granted",
                                    (key,))
        granted = await cursor.fetchone()
        if granted is None or not granted["granted"]:
            return None
        cursor = await conn.execute("SELECT id, event_id, body, stored FROM audit_intake"
                                    " ORDER BY id LIMIT %s", (limit,))
        rows = await cursor.fetchall()
        if not rows:
            return Batch(0, 0)  # wrote nothing: no commit to flush for an idle look
        cursor = await conn.execute("SELECT entries, head, frontier, stored_content_hashes"
                                    " FROM audit_chain WHERE id = 1 FOR UPDATE")
        chain = await cursor.fetchone()
        if chain is None:
            raise MemoryConfigurationError("the audit trail is not switched on for this "
                                           "schema (no audit_chain row)")
        cursor = await conn.execute("SELECT event_id FROM audit_entries"
                                    " WHERE event_id = ANY(%s)",
                                    ([row["event_id"] for row in rows],))
        held = {str(row["event_id"]) for row in await cursor.fetchall()}
        seq, head = int(chain["entries"]), str(chain["head"])
        frontier = Frontier.restore(seq, bytes(chain["frontier"]))
        keep_hashes = bool(chain["stored_content_hashes"])
        seqs: list[int] = []
        ids: list[str] = []
        events: list[str] = []
        prevs: list[str] = []
        hashes: list[str] = []
        leaves: list[bytes] = []
        for row in rows:
            event_id = str(row["event_id"])
            if event_id in held:
                continue
            held.add(event_id)
            body = _event_bytes(row, strip_content_hashes=bool(row["stored"])
                                and not keep_hashes)
            digest = entry_hash(head, body)
            leaf = leaf_hash(body)
            seq += 1
            seqs.append(seq)
            ids.append(event_id)
            events.append(body.decode("ascii"))
            prevs.append(head)
            hashes.append(digest)
            leaves.append(leaf)
            frontier.append(leaf)
            head = digest
        if seqs:
            await conn.execute(
                "INSERT INTO audit_entries (seq, event_id, event, prev, hash, leaf)"
                # Binary arrays: the text form would escape every quote of the events.
                " SELECT * FROM unnest(%b::bigint[], %b::text[], %b::text[], %b::text[],"
                " %b::text[], %b::bytea[])", (seqs, ids, events, prevs, hashes, leaves))
            await conn.execute("UPDATE audit_chain SET entries = %s, head = %s, frontier = %s"
                               " WHERE id = 1", (seq, head, frontier.state()))
        await conn.execute("DELETE FROM audit_intake WHERE id = ANY(%s)",
                           ([row["id"] for row in rows],))
        if before_commit is not None:
            await before_commit(len(seqs))
    return Batch(len(rows), len(seqs))


def _event_bytes(row: Row, *, strip_content_hashes: bool) -> bytes:
    """The canonical bytes of the intake row's event, read strictly; a stored event
    loses its content hashes when the trail may not keep them."""
    where = f"audit intake row {row['id']}"
    try:
        value = read_json(str(row["body"]), where)
    except JsonDocumentError as exc:
        raise TrailIntakeError(f"{exc} (the sequencer stops here)") from None
    if not isinstance(value, dict) or value.get("event_id") != row["event_id"]:
        raise TrailIntakeError(f"{where}: not an event object carrying its event_id "
                               f"{row['event_id']!r} (the sequencer stops here)")
    if strip_content_hashes and value.get("content_hashes"):
        value["content_hashes"] = []
    try:
        return canonical_bytes(value)
    except ValueError:
        raise TrailIntakeError(f"{where}: holds a value JSON cannot carry (the sequencer "
                               "stops here)") from None
