"""Building RFC 9162 Merkle trees over a trail's leaf hashes, and proofs from them.

This is the prover's half; :mod:`governed_memory.audit.proofs` is the auditor's. Two
shapes, for two jobs:

- :class:`Frontier` folds leaves in one at a time and keeps only the roots of the
  perfect subtrees so far (at most 64 hashes), which is all a root needs: verification
  and checkpoints compute roots while they walk the trail, in flat memory.
- :class:`MerkleTree` holds the hashes of every perfect subtree, level by level
  (about two hashes per leaf: 64 MB for 2**20 leaves, whatever the events weigh), built
  bottom-up in one pass per level with no recursion. Every subtree hash RFC 9162's
  ``PATH`` and ``SUBPROOF`` ask for is then a lookup or a short fold of lookups, so
  one tree answers inclusion proofs at any index and consistency proofs between any
  two sizes up to its own, in O(log n) each.

The tree of RFC 9162 §2.1.1 (split at the largest power of two below n) is the tree in
which the last node of an odd-sized level is carried up unpaired; either way its left
subtrees are perfect, which is why perfect subtrees are all that needs keeping.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from governed_memory.audit.proofs import EMPTY_ROOT, HASH_SIZE, NODE_PREFIX, node_hash, split_point


class Frontier:
    """The roots of the perfect subtrees covering the leaves appended so far, largest
    first (one per set bit of the size): a Merkle root in O(log n) memory."""

    __slots__ = ("_stack", "size")

    def __init__(self) -> None:
        self._stack: list[bytes] = []
        self.size = 0

    def append(self, leaf: bytes) -> None:
        node, size = leaf, self.size
        while size & 1:
            node = node_hash(self._stack.pop(), node)
            size >>= 1
        self._stack.append(node)
        self.size += 1

    @classmethod
    def restore(cls, size: int, nodes: bytes) -> Frontier:
        """The frontier whose :meth:`state` was ``nodes`` after ``size`` leaves: a store
        that extends a tree keeps this instead of every leaf to compute roots from.
        Raises ``ValueError`` if ``nodes`` is not one hash per set bit of ``size``."""
        if size < 0 or len(nodes) != HASH_SIZE * size.bit_count():
            raise ValueError(f"a frontier of {size} leaves holds {size.bit_count()} hashes, "
                             f"not {len(nodes) / HASH_SIZE:g}")
        frontier = cls()
        frontier._stack = [nodes[i:i + HASH_SIZE] for i in range(0, len(nodes), HASH_SIZE)]
        frontier.size = size
        return frontier

    def state(self) -> bytes:
        """The perfect subtrees' roots, largest first, concatenated (see :meth:`restore`)."""
        return b"".join(self._stack)

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        node = self._stack[-1]
        for left in reversed(self._stack[:-1]):
            node = node_hash(left, node)
        return node


class MerkleTree:
    """Every perfect subtree hash over ``leaves`` (concatenated 32-byte leaf hashes):
    level ``h`` holds the ``size >> h`` subtrees of ``2**h`` leaves, left to right."""

    def __init__(self, leaves: bytes | bytearray | memoryview) -> None:
        data = bytes(leaves)
        if len(data) % HASH_SIZE:
            raise ValueError("leaf hashes come in 32-byte pieces")
        self.size = len(data) // HASH_SIZE
        self._levels: list[bytes] = [data]
        sha256, prefix = hashlib.sha256, NODE_PREFIX
        pair = 2 * HASH_SIZE
        while len(data) >= pair:
            end = len(data) - len(data) % pair  # an odd last node is not a perfect pair
            data = b"".join([sha256(prefix + data[i:i + pair]).digest()
                             for i in range(0, end, pair)])
            self._levels.append(data)

    @classmethod
    def of(cls, leaves: Iterable[bytes]) -> MerkleTree:
        return cls(b"".join(leaves))

    def leaf(self, index: int) -> bytes:
        return self._node(0, index)

    def _node(self, height: int, index: int) -> bytes:
        start = index * HASH_SIZE
        return self._levels[height][start:start + HASH_SIZE]

    def subtree(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) for a range RFC 9162's recursion visits: ``start`` is a
        multiple of the largest power of two not above ``end - start``."""
        if not 0 <= start <= end <= self.size:
            raise IndexError(f"leaves {start}..{end} are not within {self.size}")
        lefts: list[bytes] = []
        while True:
            count = end - start
            if count == 0:
                node = EMPTY_ROOT
                break
            if count & (count - 1) == 0:
                height = count.bit_length() - 1
                node = self._node(height, start >> height)
                break
            # the left part is perfect: fold it in after the right part is known
            split = split_point(count)
            height = split.bit_length() - 1
            lefts.append(self._node(height, start >> height))
            start += split
        for left in reversed(lefts):
            node = node_hash(left, node)
        return node

    def root(self, size: int | None = None) -> bytes:
        """The root of the tree of the first ``size`` leaves (all of them by default)."""
        return self.subtree(0, self.size if size is None else size)

    def inclusion_path(self, index: int, size: int | None = None) -> list[bytes]:
        """RFC 9162 §2.1.3.1 ``PATH(index, D[0:size])``, from the leaf up."""
        size = self.size if size is None else size
        if not 0 <= index < size <= self.size:
            raise IndexError(f"leaf {index} is not within a tree of {size} entries "
                             f"(this tree has {self.size})")
        path: list[bytes] = []  # top-down, reversed at the end
        start, count, offset = 0, size, index
        while count > 1:
            split = split_point(count)
            if offset < split:
                path.append(self.subtree(start + split, start + count))
                count = split
            else:
                path.append(self.subtree(start, start + split))
                start, count, offset = start + split, count - split, offset - split
        path.reverse()
        return path

    def consistency_path(self, first: int, second: int | None = None) -> list[bytes]:
        """RFC 9162 §2.1.4.1 ``PROOF(first, D[0:second])``; empty when ``first`` is 0 or
        equals ``second`` (nothing to prove beyond the roots themselves)."""
        second = self.size if second is None else second
        if not 0 <= first <= second <= self.size:
            raise IndexError(f"no consistency proof from {first} to {second} entries "
                             f"(this tree has {self.size})")
        if first in (0, second):
            return []
        path: list[bytes] = []  # top-down, reversed at the end
        start, count, wanted, whole = 0, second, first, True
        while wanted != count:
            split = split_point(count)
            if wanted <= split:
                path.append(self.subtree(start + split, start + count))
                count = split
            else:
                path.append(self.subtree(start, start + split))
                start, count, wanted, whole = start + split, count - split, wanted - split, False
        if not whole:
            path.append(self.subtree(start, start + count))
        path.reverse()
        return path
