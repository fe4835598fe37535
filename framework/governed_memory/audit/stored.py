"""A trail kept in a database rather than in files: what the audit tools read of it.

A trail store (the native plugin's ``postgres-trail`` sink keeps one in PostgreSQL)
holds the same chain the file trail writes: a genesis, and entries each holding an
event's canonical bytes, the previous entry's hash and its own (``chain.py``'s rules),
plus a Merkle leaf hash per entry and the tree's frontier at the head, so a proof needs
no pass over the events. The tools read it through :class:`StoredTrail`, a small,
synchronous, read-only protocol, and never import the store's driver: the framework
knows the protocol, the plugin implements it.

Read as lines (:func:`stored_lines`), a stored trail is the one file an export of it
would be without rotation: the genesis line and then each entry's line, built from the
stored parts as they are (nothing recomputed into agreement), so :func:`verify_trail`
walks it with the very checks it applies to files, and an altered row shows as the
break it is. On top, a stored trail is checked for what files do not have: each
entry's stored leaf must be the leaf of its event, and the head record (entry count,
head hash, Merkle frontier) must describe the entries actually there.

A store that cannot be reached raises ``MemoryUnavailableError`` from any method.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import attrs

from governed_memory.audit.chain import stated_entry_line, stated_genesis_line


@attrs.frozen(slots=True)
class StoredOpening:
    """The chain's genesis as stored: its id, when it began and its stated hash."""

    chain_id: str
    created_at: float
    genesis: str


@attrs.frozen(slots=True)
class StoredHead:
    """The store's record of how far the chain reaches: entries, head hash, and the
    Merkle frontier after them (``merkle.Frontier.state``)."""

    entries: int
    head: str
    frontier: bytes


@attrs.frozen(slots=True)
class StoredEntry:
    """One entry's stored parts (``event`` is its canonical bytes)."""

    seq: int
    event: bytes
    prev: str
    hash: str
    leaf: bytes

    def line(self) -> bytes:
        """The entry's trail line, newline included."""
        return stated_entry_line(self.seq, self.prev, self.hash, self.event)


@runtime_checkable
class StoredTrail(Protocol):
    """Read access to a trail in a store, open for the length of one command. Every
    read sees one snapshot of the store, so the head record and the entries agree
    unless someone altered them."""

    @property
    def location(self) -> str:
        """Where the trail is, for messages: never a password."""
        ...

    def opening(self) -> StoredOpening | None:
        """The genesis, or ``None`` when the store holds no trail."""
        ...

    def head(self) -> StoredHead:
        ...

    def entries(self, upto: int | None = None) -> Iterator[StoredEntry]:
        """Entries in order of ``seq``, streamed, those up to ``upto`` (all without)."""
        ...

    def find(self, event_id: str) -> StoredEntry | None:
        """The entry holding ``event_id``, by the store's index on event ids."""
        ...

    def leaves(self, upto: int) -> bytes:
        """The stored leaf hashes of entries 1 to ``upto``, concatenated in order (fewer
        when the trail is shorter)."""
        ...

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of entry ``seq`` (the genesis hash for 0), if there is one."""
        ...

    def waiting(self) -> int:
        """Events recorded and not yet given a position by the sequencer."""
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class TrailStore(Protocol):
    """A sink whose trail the audit tools can read (``governed-memory audit verify
    --store ...``): it opens a :class:`StoredTrail` on the same store."""

    def stored_trail(self) -> StoredTrail:
        ...


def stored_lines(trail: StoredTrail) -> Iterator[tuple[bytes, StoredEntry | None]]:
    """The trail as the lines of one file, each without its newline: the genesis line
    (with ``None``), then each entry's line with its stored parts. Nothing when the
    store holds no trail."""
    opening = trail.opening()
    if opening is None:
        return
    yield stated_genesis_line(opening.chain_id, opening.created_at, opening.genesis)[:-1], None
    for entry in trail.entries():
        yield entry.line()[:-1], entry
