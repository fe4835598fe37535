"""Proofs from a trail on disk: inclusion of one event, consistency of two checkpoints.

The trail is streamed file by file and line by line; what is kept is one 32-byte leaf
hash per entry (32 MB for 2**20 entries, against some 800 MB of trail), then the
tree's levels over them (:class:`~governed_memory.audit.merkle.MerkleTree`). A leaf is
cut from its line without parsing it: a canonical entry line is ``{"event":`` + the
event's canonical bytes + a fixed tail, and its event id is looked for as bytes, so a
line costs a slice and a hash rather than a JSON round trip (about 20 times less than
verifying it).

Proving does not re-verify the chain: a checkpoint was taken over a verified trail
(``tree_checkpoint_of``), and a proof is built only if the trail's first ``tree_size``
entries hash to the checkpoint's root and the chain's head there is the checkpoint's
head. A trail rewritten since is refused (``TrailProblemError``); a proof that got out
would fail the auditor's check anyway. ``audit verify`` verifies the chain itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from governed_memory.audit.chain import ChainFormatError, parse_line, read_chain_json
from governed_memory.audit.merkle import MerkleTree
from governed_memory.audit.proofs import (
    LEAF_PREFIX,
    ConsistencyProof,
    ForeignTrailError,
    InclusionProof,
    TreeCheckpoint,
    TreeSizeError,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit.stored import StoredTrail
from governed_memory.audit.verify import (
    NO_TRAIL,
    NOT_A_TRAIL,
    PROGRESS_EVERY,
    Problem,
    Source,
    TrailProblemError,
    _expand,
)

_ENTRY_HEAD: Final = b'{"event":'
_TAIL: Final = b',"hash":"'


class EventNotInTreeError(LookupError):
    """The event is not among the entries a checkpoint covers (not in the trail at
    all, or appended after the checkpoint was taken: ``seq`` says where)."""

    def __init__(self, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq


@attrs.frozen(slots=True)
class Found:
    index: int
    """Leaf index (``seq - 1``)."""
    event: bytes
    """The event's canonical bytes, as the chain hashed them."""


@attrs.frozen(slots=True)
class TrailLeaves:
    """What one streaming pass over a trail keeps: its chain id, a leaf hash per entry
    read (up to the limit), chain heads at the sizes asked for, and the event looked
    for, if it was found."""

    chain_id: str
    leaves: bytes
    heads: dict[int, str]
    last_file: str
    found: Found | None = None
    found_later: int | None = None
    """The ``seq`` of the event looked for, when it lies past the limit."""

    @property
    def size(self) -> int:
        return len(self.leaves) // 32

    def tree(self) -> MerkleTree:
        return MerkleTree(self.leaves)


def read_leaves(paths: Sequence[Source], *, limit: int | None = None,
                event_id: str | None = None, heads_at: frozenset[int] = frozenset(),
                progress: Callable[[int], None] | None = None) -> TrailLeaves:
    """One pass over the trail from its genesis: leaf hashes of the first ``limit``
    entries (all by default); past the limit it only looks on for ``event_id``."""
    expanded = _expand(paths)
    if not expanded:
        where = ", ".join(str(p) for p in paths)
        raise TrailProblemError(Problem(where, 0, None, "no trail here: no audit-*.jsonl "
                                                        "files", NO_TRAIL))
    stores = [source for source, _ in expanded if isinstance(source, StoredTrail)]
    if stores:
        if len(expanded) > 1:
            raise ValueError("a trail store is proven from on its own, not with other files")
        return _stored_leaves(stores[0], limit=limit, event_id=event_id, heads_at=heads_at)
    needle = (b'"event_id":' + json.dumps(event_id).encode("ascii")
              if event_id is not None else None)
    leaves = bytearray()
    heads: dict[int, str] = {}
    chain_id: str | None = None
    count = 0
    found: Found | None = None
    later: int | None = None
    sha256, prefix = hashlib.sha256, LEAF_PREFIX
    first = expanded[0][0]
    assert isinstance(first, Path)
    path = first

    def broken(number: int, reason: str, kind: str = "broken") -> TrailProblemError:
        return TrailProblemError(Problem(str(path), number, count + 1, reason, kind))

    stop = False
    for position, (source, _) in enumerate(expanded):
        assert isinstance(source, Path)
        path = source
        if stop:
            break
        unreported = 0
        try:
            handle = open(path, "rb")  # noqa: SIM115 - a with block follows at once
        except OSError as exc:
            raise TrailProblemError(Problem(str(path), 0, None,
                                            f"cannot read: {exc.strerror}")) from None
        with handle:
            for number, line in enumerate(handle, start=1):
                if progress is not None:
                    unreported += len(line)
                    if number % PROGRESS_EVERY == 0:
                        progress(unreported)
                        unreported = 0
                if number == 1:
                    if not line.endswith(b"\n"):
                        raise broken(1, "incomplete first line (torn write or truncation)")
                    opening = _opening(line[:-1], position, chain_id, count, broken)
                    chain_id = str(opening["chain_id"])
                    if position == 0:
                        heads[0] = str(opening["hash"])
                    continue
                done = limit is not None and count >= limit
                if done and (needle is None or later is not None):
                    stop = True
                    break
                if not line.endswith(b"\n"):
                    if done:
                        break
                    raise broken(number, "incomplete last line (torn write or truncation)")
                raw = line[:-1]
                if not raw.startswith(_ENTRY_HEAD) or (cut := raw.rfind(_TAIL)) < 0:
                    raise broken(number, _why_not_an_entry(raw))
                body = raw[len(_ENTRY_HEAD):cut]
                count += 1
                if done:
                    if (needle is not None and needle in body
                            and _is_event(body, event_id, number, broken)):
                        later = count
                    continue
                leaves += sha256(prefix + body).digest()
                if count in heads_at:
                    at = cut + len(_TAIL)
                    heads[count] = raw[at:at + 64].decode("ascii", "replace")
                if (needle is not None and found is None and needle in body
                        and _is_event(body, event_id, number, broken)):
                    found = Found(count - 1, body)
        if progress is not None and unreported:
            progress(unreported)
    assert chain_id is not None
    return TrailLeaves(chain_id, bytes(leaves), heads, str(path), found, later)


def _stored_leaves(trail: StoredTrail, *, limit: int | None, event_id: str | None,
                   heads_at: frozenset[int]) -> TrailLeaves:
    """What :func:`read_leaves` returns, from a trail store's leaf hashes and its index
    on event ids rather than a pass over every event. Stored leaves are not trusted:
    the tree they make must have the checkpoint's root (``_matching``), and the event
    found must hash to its leaf under the proof (``verify_inclusion``), so an altered
    row is refused, never proven."""
    opening = trail.opening()
    if opening is None:
        raise TrailProblemError(Problem(trail.location, 0, None, "no trail here: the store "
                                                                 "holds no audit trail",
                                        NO_TRAIL))
    upto = trail.head().entries if limit is None else limit
    leaves = trail.leaves(upto)
    if len(leaves) % 32:
        raise TrailProblemError(Problem(trail.location, 0, None,
                                        "a stored leaf hash is not 32 bytes (altered)"))
    heads: dict[int, str] = {}
    for size in heads_at:
        stated = opening.genesis if size == 0 else trail.hash_at(size)
        if stated is not None:
            heads[size] = stated
    found: Found | None = None
    later: int | None = None
    if event_id is not None:
        entry = trail.find(event_id)
        if entry is not None and entry.seq <= upto:
            found = Found(entry.seq - 1, entry.event)
        elif entry is not None:
            later = entry.seq
    return TrailLeaves(opening.chain_id, leaves, heads, trail.location, found, later)


def _opening(raw: bytes, position: int, chain_id: str | None, count: int,
             broken: Callable[..., TrailProblemError]) -> dict[str, Any]:
    """A file's first line, which must open the trail (a genesis, in the first file) or
    continue it exactly where the previous file ended."""
    try:
        value = parse_line(raw)
    except ChainFormatError as exc:
        if position == 0:
            raise broken(1, "not a hash-chained trail: its first line is no chain line",
                         NOT_A_TRAIL) from None
        raise broken(1, str(exc)) from None
    kind = value["kind"]
    if position == 0:
        if kind != "genesis":
            raise broken(1, "a proof covers the trail from its genesis: pass the trail's "
                            "directory or every file from audit-000001.jsonl on")
        return value
    if kind != "continue" or value["chain_id"] != chain_id or value["seq"] != count:
        raise broken(1, "the file does not continue the previous one (another chain, or "
                        "entries missing between them)")
    return value


def _why_not_an_entry(raw: bytes) -> str:
    """What is wrong with a line that is not shaped as an entry line (read only then,
    so the streaming pass stays a slice and a hash a line)."""
    try:
        parse_line(raw)
    except ChainFormatError as exc:
        return str(exc)
    return "not an entry line"


def _is_event(body: bytes, event_id: str | None, number: int,
              broken: Callable[..., TrailProblemError]) -> bool:
    """Whether the event really is ``event_id`` (the bytes could sit deeper inside).
    An event that is not strict JSON is damage (a line a writer of this format cannot
    have written), never a match or a miss."""
    try:
        value = read_chain_json(body, "")
    except ChainFormatError as exc:
        raise broken(number, f"the entry's event: {exc}") from None
    return isinstance(value, dict) and value.get("event_id") == event_id


def _matching(leaves: TrailLeaves, tree: MerkleTree, checkpoint: TreeCheckpoint) -> None:
    """Refuse a trail whose first ``tree_size`` entries are not the checkpoint's."""
    if leaves.chain_id != checkpoint.chain_id:
        raise ForeignTrailError(f"the checkpoint is of chain {checkpoint.chain_id}, the "
                                f"trail is chain {leaves.chain_id}")
    size = checkpoint.tree_size
    if tree.size < size:
        raise TrailProblemError(Problem(leaves.last_file, 0, size,
                                        f"truncated: the checkpoint covers {size} entries, "
                                        f"the trail ends at entry {tree.size}"))
    if leaves.heads.get(size) != checkpoint.head:
        raise TrailProblemError(Problem(leaves.last_file, 0, size,
                                        "the trail's hash at the checkpoint differs from the "
                                        "checkpoint's head (the trail was rewritten, or the "
                                        "checkpoint altered)"))
    if tree.root(size) != checkpoint.root_bytes:
        raise TrailProblemError(Problem(leaves.last_file, 0, size,
                                        f"the trail's first {size} entries do not hash to the "
                                        "checkpoint's Merkle root (the trail was rewritten, "
                                        "or the checkpoint altered)"))


def prove_inclusion(paths: Sequence[Source], event_id: str, checkpoint: TreeCheckpoint, *,
                    progress: Callable[[int], None] | None = None
                    ) -> tuple[InclusionProof, bytes]:
    """An inclusion proof of ``event_id`` against ``checkpoint``, and the event's
    canonical bytes (what the auditor is shown with it). The proof is checked with the
    auditor's verifier before it is returned."""
    leaves = read_leaves(paths, limit=checkpoint.tree_size, event_id=event_id,
                         heads_at=frozenset({checkpoint.tree_size}), progress=progress)
    tree = leaves.tree()
    _matching(leaves, tree, checkpoint)
    if leaves.found is None:
        if leaves.found_later is not None:
            raise EventNotInTreeError(
                f"event {event_id} is entry {leaves.found_later}, after the "
                f"checkpoint's {checkpoint.tree_size} entries: take a later checkpoint",
                leaves.found_later)
        raise EventNotInTreeError(f"event {event_id} is not in the trail")
    index = leaves.found.index
    proof = InclusionProof(checkpoint.chain_id, event_id, index, checkpoint.tree_size,
                           tuple(node.hex() for node in tree.inclusion_path(
                               index, checkpoint.tree_size)))
    verify_inclusion(leaves.found.event, proof, checkpoint)
    return proof, leaves.found.event


def prove_consistency(paths: Sequence[Source], first: TreeCheckpoint,
                      second: TreeCheckpoint, *,
                      progress: Callable[[int], None] | None = None) -> ConsistencyProof:
    """A proof that ``second``'s tree extends ``first``'s, from a trail both match."""
    if first.chain_id != second.chain_id:
        raise ForeignTrailError(f"the checkpoints are of two trails: {first.chain_id} and "
                                f"{second.chain_id}")
    if first.tree_size > second.tree_size:
        raise TreeSizeError(f"the first checkpoint ({first.tree_size} entries) is later "
                            f"than the second ({second.tree_size}): give them oldest first")
    leaves = read_leaves(paths, limit=second.tree_size,
                         heads_at=frozenset({first.tree_size, second.tree_size}),
                         progress=progress)
    tree = leaves.tree()
    _matching(leaves, tree, first)
    _matching(leaves, tree, second)
    proof = ConsistencyProof(first.chain_id, first.tree_size, second.tree_size,
                             tuple(node.hex() for node in tree.consistency_path(
                                 first.tree_size, second.tree_size)))
    verify_consistency(first, second, proof)
    return proof


def trail_bytes(paths: Sequence[Source]) -> int:
    """How many bytes a pass over the trail reads (for a progress bar's length)."""
    total = 0
    for path, _ in _expand(paths):
        if isinstance(path, StoredTrail):
            continue  # streamed from a database: no length known beforehand
        try:
            total += Path(path).stat().st_size
        except OSError:
            continue
    return total
