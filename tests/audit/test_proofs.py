"""The auditor's verifier on its own: documents round-trip and are parsed strictly,
every kind of tampering is refused with its own error, a signed checkpoint holds only
for its key, and (hypothesis) for random sizes m <= n every inclusion proof verifies
against the signed checkpoint of n, the consistency proof m -> n verifies, and any
single changed byte of a proof, of a signed checkpoint or of the event is refused."""

from __future__ import annotations

import json

import attrs
import pytest
from audit_support import event
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from governed_memory.audit.chain import canonical_bytes
from governed_memory.audit.merkle import MerkleTree
from governed_memory.audit.proofs import (
    EMPTY_ROOT,
    BadSignatureError,
    ConsistencyProof,
    ForeignTrailError,
    InclusionProof,
    KeyMismatchError,
    LeafMismatchError,
    PathLengthError,
    ProofDocumentError,
    ProofError,
    ProofFormatError,
    RootMismatchError,
    TreeCheckpoint,
    TreeSizeError,
    UnsignedCheckpointError,
    event_leaf,
    key_id,
    load_document,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit.signing import sign_checkpoint
from governed_memory.converter import unstructure
from hypothesis import assume, given
from hypothesis import strategies as st

CHAIN = "chain_" + "5c" * 16
KEY = Ed25519PrivateKey.generate()
OTHER_KEY = Ed25519PrivateKey.generate()
PUBLIC = KEY.public_key()


def events(n: int) -> list[dict[str, object]]:
    return [unstructure(event(i)) for i in range(n)]


class Trail:
    """Events, the tree over them and signed checkpoints at any size: what a trail and
    ``audit checkpoint --sign`` give an auditor, without the files."""

    def __init__(self, n: int, chain_id: str = CHAIN) -> None:
        self.events = events(n)
        self.chain_id = chain_id
        self.tree = MerkleTree.of(event_leaf(e) for e in self.events)

    def checkpoint(self, size: int | None = None, *, signed: bool = True,
                   key: Ed25519PrivateKey = KEY) -> TreeCheckpoint:
        size = self.tree.size if size is None else size
        checkpoint = TreeCheckpoint(self.chain_id, size, self.tree.root(size).hex(),
                                    f"{size:064x}", 1_800_000_000.25)
        return sign_checkpoint(checkpoint, key) if signed else checkpoint

    def inclusion(self, index: int, size: int | None = None) -> InclusionProof:
        size = self.tree.size if size is None else size
        return InclusionProof(self.chain_id, str(self.events[index]["event_id"]), index, size,
                              tuple(n.hex() for n in self.tree.inclusion_path(index, size)))

    def consistency(self, first: int, second: int | None = None) -> ConsistencyProof:
        second = self.tree.size if second is None else second
        return ConsistencyProof(self.chain_id, first, second, tuple(
            n.hex() for n in self.tree.consistency_path(first, second)))


TRAIL = Trail(13)


# -- documents ---------------------------------------------------------------------------


def test_documents_round_trip_through_canonical_json() -> None:
    checkpoint, proof, consistency = TRAIL.checkpoint(), TRAIL.inclusion(6), TRAIL.consistency(5)
    for document in (checkpoint, TRAIL.checkpoint(signed=False), proof, consistency):
        text = document.to_json()
        assert text.encode("ascii") == canonical_bytes(json.loads(text))
        assert type(document).from_json(text) == document
        assert type(document).from_json(text + "\n") == document
        assert load_document(text) == document
    assert json.loads(proof.to_json())["format"] == "governed-memory-inclusion-proof/1"
    assert json.loads(checkpoint.to_json())["chain_id"] == CHAIN
    assert proof.seq == 7


def test_the_compact_proof_round_trips_and_stays_under_a_kilobyte_at_a_million() -> None:
    proof = TRAIL.inclusion(6)
    assert InclusionProof.from_bytes(proof.to_bytes()) == proof
    million = attrs.evolve(proof, leaf_index=999_999, tree_size=1_000_000,
                           audit_path=tuple(f"{i:064x}" for i in range(20)))
    assert len(million.to_bytes()) < 1024
    assert InclusionProof.from_bytes(million.to_bytes()) == million
    for cut in (0, 4, 10, len(million.to_bytes()) - 1):
        with pytest.raises(ProofFormatError):
            InclusionProof.from_bytes(million.to_bytes()[:cut])
    with pytest.raises(ProofFormatError):
        InclusionProof.from_bytes(million.to_bytes() + b"\0")


@pytest.mark.parametrize("change", [
    pytest.param(lambda d: {**d, "extra": 1}, id="unknown key"),
    pytest.param(lambda d: {k: v for k, v in d.items() if k != "head"}, id="missing key"),
    pytest.param(lambda d: {**d, "tree_size": "13"}, id="size as text"),
    pytest.param(lambda d: {**d, "tree_size": True}, id="size as bool"),
    pytest.param(lambda d: {**d, "tree_size": -1}, id="negative size"),
    pytest.param(lambda d: {**d, "created_at": 1_800_000_000}, id="time as int"),
    pytest.param(lambda d: {**d, "root": d["root"].upper()}, id="upper-case hex"),
    pytest.param(lambda d: {**d, "root": d["root"][:-2]}, id="short root"),
    pytest.param(lambda d: {**d, "format": "governed-memory-checkpoint/2"}, id="version"),
    pytest.param(lambda d: {**d, "signature": None}, id="key id without signature"),
    pytest.param(lambda d: {**d, "chain_id": ""}, id="empty chain id"),
])
def test_a_malformed_checkpoint_is_refused(change: object) -> None:
    body = json.loads(TRAIL.checkpoint().to_json())
    text = canonical_bytes(change(body)).decode()  # type: ignore[operator]
    with pytest.raises(ProofFormatError):
        TreeCheckpoint.from_json(text)


def test_only_the_canonical_form_is_read() -> None:
    text = TRAIL.inclusion(2).to_json()
    for other in (json.dumps(json.loads(text), indent=1),
                  json.dumps(json.loads(text), sort_keys=False),
                  text.replace(",", ", ")):
        with pytest.raises(ProofFormatError, match="canonical"):
            InclusionProof.from_json(other)
    with pytest.raises(ProofFormatError, match="not JSON"):
        load_document("{")
    with pytest.raises(ProofFormatError, match="unknown format"):
        load_document('{"format":"something-else/1"}')
    with pytest.raises(ProofFormatError):
        InclusionProof.from_json(TRAIL.consistency(3).to_json())  # another kind of document
    with pytest.raises(ProofFormatError):
        TreeCheckpoint.from_json(json.dumps({**json.loads(TRAIL.checkpoint(0).to_json()),
                                             "root": "ab" * 32}, separators=(",", ":"),
                                            sort_keys=True))  # an empty tree has one root


def test_a_path_longer_than_any_tree_needs_is_not_even_read() -> None:
    body = json.loads(TRAIL.inclusion(0).to_json())
    body["audit_path"] = ["00" * 32] * 65
    with pytest.raises(ProofFormatError):
        InclusionProof.from_json(canonical_bytes(body))


# -- what an auditor is told ------------------------------------------------------------


def test_an_event_in_any_layout_verifies() -> None:
    proof, checkpoint = TRAIL.inclusion(4), TRAIL.checkpoint()
    chosen = TRAIL.events[4]
    verify_inclusion(chosen, proof, checkpoint, public_key=PUBLIC)
    verify_inclusion(json.dumps(chosen, indent=2), proof, checkpoint)
    verify_inclusion(canonical_bytes(chosen), proof, checkpoint)
    pem = PUBLIC.public_bytes(serialization.Encoding.PEM,
                              serialization.PublicFormat.SubjectPublicKeyInfo)
    verify_inclusion(chosen, proof, checkpoint, public_key=pem)
    verify_inclusion(chosen, proof, checkpoint, public_key=pem.decode())


def test_every_leaf_of_a_tree_and_every_earlier_size_verify() -> None:
    later = TRAIL.checkpoint()
    for index in range(13):
        verify_inclusion(TRAIL.events[index], TRAIL.inclusion(index), later, public_key=PUBLIC)
    for first in range(14):
        verify_consistency(TRAIL.checkpoint(first), later, TRAIL.consistency(first),
                           public_key=PUBLIC)
    verify_inclusion(TRAIL.events[2], TRAIL.inclusion(2, 5), TRAIL.checkpoint(5))


def _refused(kind: type[ProofError], check: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(kind) as raised:
        check(*args, **kwargs)  # type: ignore[operator]
    assert type(raised.value) is kind, raised.value
    return str(raised.value)


def test_inclusion_tampering_is_refused_each_with_its_own_error() -> None:
    proof, checkpoint, chosen = TRAIL.inclusion(6), TRAIL.checkpoint(), TRAIL.events[6]
    path = proof.audit_path
    refuse = verify_inclusion

    # a wrong leaf: another event, or this event altered
    _refused(LeafMismatchError, refuse, TRAIL.events[7], proof, checkpoint)
    _refused(RootMismatchError, refuse, {**chosen, "outcome": "deny"}, proof, checkpoint)
    _refused(RootMismatchError, refuse, {**chosen, "versions": [2]}, proof, checkpoint)
    # the path reordered, altered, shortened, extended
    _refused(RootMismatchError, refuse, chosen,
             attrs.evolve(proof, audit_path=(path[1], path[0], *path[2:])), checkpoint)
    _refused(RootMismatchError, refuse, chosen,
             attrs.evolve(proof, audit_path=("00" * 32, *path[1:])), checkpoint)
    _refused(PathLengthError, refuse, chosen, attrs.evolve(proof, audit_path=path[:-1]),
             checkpoint)
    _refused(PathLengthError, refuse, chosen, attrs.evolve(proof, audit_path=(*path, path[0])),
             checkpoint)
    # a wrong index or tree size
    _refused(RootMismatchError, refuse, chosen, attrs.evolve(proof, leaf_index=7), checkpoint)
    _refused(TreeSizeError, refuse, chosen, attrs.evolve(proof, leaf_index=13), checkpoint)
    _refused(TreeSizeError, refuse, chosen, attrs.evolve(proof, tree_size=14), checkpoint)
    _refused(TreeSizeError, refuse, chosen, proof, TRAIL.checkpoint(12))
    # a proof or checkpoint of another trail
    other = Trail(13, chain_id="chain_" + "77" * 16)
    _refused(ForeignTrailError, refuse, chosen, proof, other.checkpoint())
    _refused(ForeignTrailError, refuse, chosen, other.inclusion(6), checkpoint)
    # an altered checkpoint: refused by its root, and by its signature when a key is given
    altered = attrs.evolve(checkpoint, root=TRAIL.tree.root(12).hex())
    _refused(RootMismatchError, refuse, chosen, proof, altered)
    _refused(BadSignatureError, refuse, chosen, proof, altered, public_key=PUBLIC)
    _refused(BadSignatureError, refuse, chosen, proof,
             attrs.evolve(checkpoint, created_at=checkpoint.created_at + 1), public_key=PUBLIC)
    # unsigned, signed by another key, another key's signature under this key's id
    _refused(UnsignedCheckpointError, refuse, chosen, proof, TRAIL.checkpoint(signed=False),
             public_key=PUBLIC)
    message = _refused(KeyMismatchError, refuse, chosen, proof,
                       TRAIL.checkpoint(key=OTHER_KEY), public_key=PUBLIC)
    assert key_id(OTHER_KEY.public_key()) in message and key_id(PUBLIC) in message
    forged = attrs.evolve(TRAIL.checkpoint(key=OTHER_KEY), key_id=key_id(PUBLIC))
    _refused(BadSignatureError, refuse, chosen, proof, forged, public_key=PUBLIC)
    # not an event at all
    _refused(ProofFormatError, refuse, "[1, 2]", proof, checkpoint)
    _refused(ProofDocumentError, refuse, b"{not json", proof, checkpoint)


def test_consistency_tampering_is_refused_each_with_its_own_error() -> None:
    first, second, proof = TRAIL.checkpoint(5), TRAIL.checkpoint(), TRAIL.consistency(5)
    check = verify_consistency
    _refused(RootMismatchError, check, first, second,
             attrs.evolve(proof, path=tuple(reversed(proof.path))))
    _refused(PathLengthError, check, first, second, attrs.evolve(proof, path=proof.path[:-1]))
    _refused(PathLengthError, check, first, second,
             attrs.evolve(proof, path=(*proof.path, proof.path[0])))
    _refused(TreeSizeError, check, first, second, attrs.evolve(proof, first_size=6))
    _refused(TreeSizeError, check, second, first, proof)
    _refused(TreeSizeError, check, second, first,
             ConsistencyProof(CHAIN, 13, 5, proof.path))
    _refused(RootMismatchError, check, attrs.evolve(first, root=TRAIL.tree.root(6).hex()),
             second, proof)
    _refused(RootMismatchError, check, first,
             attrs.evolve(second, root=TRAIL.tree.root(12).hex()), proof)
    _refused(BadSignatureError, check, attrs.evolve(first, root=TRAIL.tree.root(6).hex()),
             second, proof, public_key=PUBLIC)
    _refused(UnsignedCheckpointError, check, TRAIL.checkpoint(5, signed=False), second, proof,
             public_key=PUBLIC)
    other = Trail(13, chain_id="chain_" + "77" * 16)
    _refused(ForeignTrailError, check, first, other.checkpoint(), proof)
    _refused(ForeignTrailError, check, first, second, other.consistency(5))
    # a rewritten history: the later tree does not extend the earlier one
    rewritten = Trail(13)
    rewritten.events[2] = {**rewritten.events[2], "outcome": "deny"}
    rewritten.tree = MerkleTree.of(event_leaf(e) for e in rewritten.events)
    _refused(RootMismatchError, check, first, rewritten.checkpoint(), rewritten.consistency(5))
    # the empty tree precedes every tree; a tree extends itself
    check(TRAIL.checkpoint(0), second, TRAIL.consistency(0), public_key=PUBLIC)
    check(second, second, TRAIL.consistency(13), public_key=PUBLIC)
    assert TRAIL.checkpoint(0).root == EMPTY_ROOT.hex()


# -- the property -------------------------------------------------------------------------


def _flip(data: bytes, position: int, mask: int) -> bytes:
    changed = bytearray(data)
    changed[position] ^= mask
    return bytes(changed)


def _refuses(load: object, verify: object, data: bytes) -> None:
    with pytest.raises(ProofError):
        verify(load(data))  # type: ignore[operator]


@given(n=st.integers(1, 64), data=st.data())
def test_proofs_of_random_sizes_verify_and_a_changed_byte_is_refused(
        n: int, data: st.DataObject) -> None:
    trail = Trail(n)
    m = data.draw(st.integers(0, n), label="m")
    later, earlier = trail.checkpoint(), trail.checkpoint(m)
    for index in range(n):
        verify_inclusion(trail.events[index], trail.inclusion(index), later, public_key=PUBLIC)
    consistency = trail.consistency(m)
    verify_consistency(earlier, later, consistency, public_key=PUBLIC)
    if m:
        index = data.draw(st.integers(0, m - 1), label="index in the earlier tree")
        verify_inclusion(trail.events[index], trail.inclusion(index, m), earlier)

    index = data.draw(st.integers(0, n - 1), label="index")
    chosen, proof = trail.events[index], trail.inclusion(index)

    def flipped(document: bytes) -> bytes:
        return _flip(document, data.draw(st.integers(0, len(document) - 1)),
                     data.draw(st.integers(1, 255)))

    _refuses(InclusionProof.from_json, lambda p: verify_inclusion(chosen, p, later),
             flipped(proof.to_json().encode()))
    _refuses(InclusionProof.from_bytes, lambda p: verify_inclusion(chosen, p, later),
             flipped(proof.to_bytes()))
    _refuses(TreeCheckpoint.from_json,
             lambda c: verify_inclusion(chosen, proof, c, public_key=PUBLIC),
             flipped(later.to_json().encode()))
    _refuses(ConsistencyProof.from_json, lambda p: verify_consistency(earlier, later, p),
             flipped(consistency.to_json().encode()))
    _refuses(TreeCheckpoint.from_json,
             lambda c: verify_consistency(c, later, consistency, public_key=PUBLIC),
             flipped(earlier.to_json().encode()))

    # the event: any change that alters its value (a byte can change the text only:
    # "1.0" -> "1e0" is the same number, and the same event)
    changed = flipped(canonical_bytes(chosen))
    try:
        same = canonical_bytes(json.loads(changed)) == canonical_bytes(chosen)
    except ValueError:
        same = False
    assume(not same)
    with pytest.raises(ProofError):
        verify_inclusion(changed, proof, later)


def test_every_single_byte_of_the_documents_counts() -> None:
    trail = Trail(21)
    chosen, proof = trail.events[11], trail.inclusion(11)
    earlier, later, consistency = trail.checkpoint(9), trail.checkpoint(), trail.consistency(9)
    cases = [
        (proof.to_json().encode(), InclusionProof.from_json,
         lambda p: verify_inclusion(chosen, p, later)),
        (proof.to_bytes(), InclusionProof.from_bytes,
         lambda p: verify_inclusion(chosen, p, later)),
        (later.to_json().encode(), TreeCheckpoint.from_json,
         lambda c: verify_inclusion(chosen, proof, c, public_key=PUBLIC)),
        (consistency.to_json().encode(), ConsistencyProof.from_json,
         lambda p: verify_consistency(earlier, later, p)),
    ]
    for document, load, verify in cases:
        for position in range(len(document)):
            for mask in (0x01, 0x20, 0x80):
                _refuses(load, verify, _flip(document, position, mask))
