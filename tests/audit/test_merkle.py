"""The Merkle tree is RFC 9162's: the published Certificate Transparency vectors (roots
of 0-8 leaves, inclusion and consistency proofs), a literal transcription of the RFC's
recursive definitions for every size and index up to 40, and a hypothesis property:
for random sizes m <= n every inclusion proof of every leaf verifies against the root
of n, the consistency proof m -> n verifies, and any single changed element (a node
hash, a removed, added or moved node, another index or size) is refused."""

from __future__ import annotations

import hashlib

import pytest
from governed_memory.audit.merkle import Frontier, MerkleTree
from governed_memory.audit.proofs import (
    EMPTY_ROOT,
    PathLengthError,
    ProofError,
    RootMismatchError,
    TreeSizeError,
    check_consistency,
    leaf_hash,
    node_hash,
    root_from_inclusion,
)
from hypothesis import given
from hypothesis import strategies as st

# The reference inputs and answers of the certificate-transparency / transparency-dev
# test suites (the RFC 6962 reference implementation's), which RFC 9162 keeps.
CT_INPUTS = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f")]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = {
    (0, 8): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    (5, 8): ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
}
CT_CONSISTENCY = {
    (1, 8): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    (6, 8): ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
    (2, 5): ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"],
}


# -- RFC 9162 §2.1, transcribed literally (recursion, counting loops) -----------------------


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return hashlib.sha256(b"\x00" + d[0]).digest()
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + mth(d[:k]) + mth(d[k:])).digest()


def path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*path(m, d[:k]), mth(d[k:])]
    return [*path(m - k, d[k:]), mth(d[:k])]


def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [mth(d)]
    k = _k(n)
    if m <= k:
        return [*subproof(m, d[:k], b), mth(d[k:])]
    return [*subproof(m - k, d[k:], False), mth(d[:k])]


def tree_of(data: list[bytes]) -> MerkleTree:
    return MerkleTree.of(leaf_hash(item) for item in data)


def items(n: int) -> list[bytes]:
    return [f"event {i}".encode() for i in range(n)]


# -- known answers ------------------------------------------------------------------------


def test_the_published_roots() -> None:
    assert EMPTY_ROOT.hex() == CT_ROOTS[0]
    for n in range(len(CT_INPUTS) + 1):
        assert tree_of(CT_INPUTS[:n]).root().hex() == CT_ROOTS[n], n
        frontier = Frontier()
        for item in CT_INPUTS[:n]:
            frontier.append(leaf_hash(item))
        assert frontier.root().hex() == CT_ROOTS[n], n
    assert tree_of(CT_INPUTS).root(3).hex() == CT_ROOTS[3]  # a past size, from a larger tree


@pytest.mark.parametrize(("index", "size"), sorted(CT_INCLUSION))
def test_the_published_inclusion_proofs(index: int, size: int) -> None:
    tree = tree_of(CT_INPUTS)
    proof = tree.inclusion_path(index, size)
    assert [node.hex() for node in proof] == CT_INCLUSION[index, size]
    root = root_from_inclusion(leaf_hash(CT_INPUTS[index]), index, size, proof)
    assert root.hex() == CT_ROOTS[size]


@pytest.mark.parametrize(("first", "second"), sorted(CT_CONSISTENCY))
def test_the_published_consistency_proofs(first: int, second: int) -> None:
    tree = tree_of(CT_INPUTS)
    proof = tree.consistency_path(first, second)
    assert [node.hex() for node in proof] == CT_CONSISTENCY[first, second]
    check_consistency(first, second, bytes.fromhex(CT_ROOTS[first]),
                      bytes.fromhex(CT_ROOTS[second]), proof)


# -- against the RFC's definitions, exhaustively for small trees ----------------------------


def test_every_size_index_and_pair_up_to_40_agrees_with_the_rfc() -> None:
    data = items(40)
    tree = tree_of(data)
    for n in range(41):
        assert tree.root(n) == mth(data[:n])
        for m in range(n):
            built = tree.inclusion_path(m, n)
            assert built == path(m, data[:n]), (m, n)
            assert root_from_inclusion(leaf_hash(data[m]), m, n, built) == mth(data[:n])
        for m in range(1, n):
            assert tree.consistency_path(m, n) == subproof(m, data[:n], True), (m, n)


def test_a_path_verifies_at_its_own_index_only() -> None:
    data = items(23)
    tree = tree_of(data)
    for index in range(23):
        proof = tree.inclusion_path(index)
        for other in range(23):
            if other == index:
                continue
            try:
                root = root_from_inclusion(leaf_hash(data[index]), other, 23, proof)
            except PathLengthError:
                continue
            assert root != tree.root(), (index, other)


def test_the_trivial_cases() -> None:
    tree = tree_of(items(5))
    assert tree.inclusion_path(0, 1) == []
    assert root_from_inclusion(tree.leaf(0), 0, 1, []) == tree.root(1) == tree.leaf(0)
    assert tree.consistency_path(0, 5) == [] and tree.consistency_path(5, 5) == []
    check_consistency(0, 5, EMPTY_ROOT, tree.root(), [])
    check_consistency(5, 5, tree.root(), tree.root(), [])
    check_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    with pytest.raises(RootMismatchError):
        check_consistency(0, 5, tree.root(), tree.root(), [])  # not the empty root
    with pytest.raises(RootMismatchError):
        check_consistency(5, 5, tree.root(4), tree.root(), [])
    with pytest.raises(PathLengthError):
        check_consistency(5, 5, tree.root(), tree.root(), [tree.leaf(0)])
    with pytest.raises(PathLengthError):
        check_consistency(2, 5, tree.root(2), tree.root(), [])
    with pytest.raises(TreeSizeError):
        check_consistency(5, 4, tree.root(), tree.root(4), [])
    with pytest.raises(TreeSizeError):
        root_from_inclusion(tree.leaf(0), 5, 5, tree.inclusion_path(4))
    with pytest.raises(IndexError):
        tree.inclusion_path(5, 5)
    with pytest.raises(IndexError):
        tree.consistency_path(3, 6)


def test_a_large_tree_is_built_without_recursion_and_proves_in_log_steps() -> None:
    size = 70_001  # odd at several levels
    leaves = b"".join(hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(size))
    tree = MerkleTree(leaves)
    frontier = Frontier()
    for i in range(size):
        frontier.append(leaves[32 * i:32 * i + 32])
    assert tree.root() == frontier.root()
    index = 65_537
    proof = tree.inclusion_path(index)
    assert len(proof) == 14  # one for the left 65 536, thirteen within the 4 465 right
    assert root_from_inclusion(tree.leaf(index), index, size, proof) == tree.root()
    consistency = tree.consistency_path(65_536, size)
    check_consistency(65_536, size, tree.root(65_536), tree.root(), consistency)


# -- the property -------------------------------------------------------------------------


def _mutations(nodes: list[bytes], draw: st.DataObject) -> list[list[bytes]]:
    """Every kind of single change to a path: each node altered, removed, duplicated
    or moved, and a node added at each end."""
    changed: list[list[bytes]] = []
    for i in range(len(nodes)):
        flipped = bytearray(nodes[i])
        flipped[draw.draw(st.integers(0, 31))] ^= draw.draw(st.integers(1, 255))
        changed.append([*nodes[:i], bytes(flipped), *nodes[i + 1:]])
        changed.append(nodes[:i] + nodes[i + 1:])
        changed.append([*nodes[:i], nodes[i], *nodes[i:]])
        for j in range(len(nodes)):
            if nodes[j] != nodes[i]:
                moved = list(nodes)
                moved[i], moved[j] = moved[j], moved[i]
                changed.append(moved)
    extra = hashlib.sha256(b"extra").digest()
    changed += [[extra, *nodes], [*nodes, extra]]
    return changed


@given(n=st.integers(1, 90), data=st.data())
def test_every_proof_verifies_and_any_single_change_is_refused(n: int,
                                                               data: st.DataObject) -> None:
    values = [f"entry {i} of {n}".encode() for i in range(n)]
    tree = tree_of(values)
    root = tree.root()
    for index in range(n):
        assert root_from_inclusion(tree.leaf(index), index, n, tree.inclusion_path(index)) == root
    m = data.draw(st.integers(0, n), label="m")
    consistency = tree.consistency_path(m, n)
    check_consistency(m, n, tree.root(m), root, consistency)

    index = data.draw(st.integers(0, n - 1), label="index")
    proof = tree.inclusion_path(index)
    for changed in _mutations(proof, data):
        with pytest.raises(ProofError):
            if root_from_inclusion(tree.leaf(index), index, n, changed) != root:
                raise RootMismatchError("refused")
    wrong_leaf = leaf_hash(b"not in the tree")
    assert root_from_inclusion(wrong_leaf, index, n, proof) != root
    # Another index is refused by the hashes. Another size is not always (the path of
    # leaf 0 of 3 also fits a tree of 4): the checkpoint binds size and root together,
    # and test_proofs refuses a proof whose size is not its checkpoint's.
    for other in {index ^ 1, index + 1, index - 1} - {index}:
        if other < 0:
            continue
        with pytest.raises(ProofError):
            if root_from_inclusion(tree.leaf(index), other, n, proof) != root:
                raise RootMismatchError("refused")
    for changed in _mutations(consistency, data):
        with pytest.raises(ProofError):
            check_consistency(m, n, tree.root(m), root, changed)
    if 0 < m < n:
        with pytest.raises(ProofError):
            check_consistency(m, n, node_hash(root, root), root, consistency)
        with pytest.raises(ProofError):
            check_consistency(m, n, tree.root(m), node_hash(root, root), consistency)
        for other in {m - 1, m + 1}:
            if 0 < other < n:
                with pytest.raises(ProofError):
                    check_consistency(other, n, tree.root(m), root, consistency)
