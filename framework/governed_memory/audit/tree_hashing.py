"""The Merkle tree of RFC 9162 (§2.1) over a trail's entries, as pure functions on bytes.

    leaf  = SHA-256(0x00 || canonical bytes of the entry's event)
    node  = SHA-256(0x01 || left || right)
    empty = SHA-256("")

The two verification algorithms (§2.1.3.2 for inclusion, §2.1.4.2 for consistency)
take hashes and sizes only: no document, no event, no trail. The prover's tree
(:mod:`governed_memory.audit.merkle`) and the auditor's checks
(:mod:`governed_memory.audit.proofs`) both build on these, so they cannot disagree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from governed_memory.audit.proof_errors import PathLengthError, RootMismatchError, TreeSizeError

HASH_SIZE: Final = 32
LEAF_PREFIX: Final = b"\x00"
NODE_PREFIX: Final = b"\x01"
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def split_point(size: int) -> int:
    """The largest power of two smaller than ``size`` (``size`` > 1): where RFC 9162
    splits a tree, so that every left subtree is perfect."""
    return 1 << ((size - 1).bit_length() - 1)


def root_from_inclusion(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes:
    """The root an audit path leads to from ``leaf`` at ``index`` of a tree of ``size``
    (RFC 9162 §2.1.3.2); the caller compares it with the root it trusts."""
    if not 0 <= index < size:
        raise TreeSizeError(f"leaf index {index} is not inside a tree of {size} entries")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise PathLengthError(f"the path is longer than a leaf of a tree of {size} "
                                  "entries needs (extended)")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise PathLengthError(f"the path is shorter than a leaf of a tree of {size} "
                              "entries needs (shortened)")
    return r


def check_consistency(first: int, second: int, first_root: bytes, second_root: bytes,
                      path: Sequence[bytes]) -> None:
    """That the tree of ``second`` entries extends the tree of ``first`` (RFC 9162
    §2.1.4.2). The RFC's proofs are for 0 < first < second; the two trivial cases are
    proven by empty paths: the empty tree precedes every tree, and a tree extends itself."""
    if not 0 <= first <= second:
        raise TreeSizeError(f"a tree of {second} entries cannot extend one of {first}")
    if first == 0 or first == second:
        if path:
            raise PathLengthError("a consistency proof from the empty tree or to the same "
                                  "size has an empty path (extended)")
        expected = EMPTY_ROOT if first == 0 else second_root
        if first_root != expected:
            raise RootMismatchError("the earlier checkpoint's root is not the root it must "
                                    "be for its size (altered, or another history)")
        return
    if not path:
        raise PathLengthError("a consistency proof between different non-empty sizes "
                              "cannot be empty (shortened)")
    nodes = list(path)
    if first & (first - 1) == 0:  # an exact power of two: the old root is a subtree
        nodes.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = nodes[0]
    for c in nodes[1:]:
        if sn == 0:
            raise PathLengthError("the consistency path is longer than the two sizes "
                                  "need (extended)")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise PathLengthError("the consistency path is shorter than the two sizes need "
                              "(shortened)")
    if fr != first_root:
        raise RootMismatchError("the path does not lead to the earlier checkpoint's root "
                                "(altered path or checkpoint, or the trail was rewritten "
                                "between them)")
    if sr != second_root:
        raise RootMismatchError("the path does not lead to the later checkpoint's root "
                                "(altered path or checkpoint, or the later trail does not "
                                "extend the earlier)")

