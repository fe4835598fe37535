"""Checking Merkle proofs and signed checkpoints of a trail, with nothing but them.

An auditor is shown one event, an inclusion proof and a checkpoint, and must be able to
tell whether the event was in the trail when the checkpoint was taken, without the
trail, its storage or the code that wrote it. So this module reads no file and imports
no sink: the standard library, the chain's canonical JSON, the audit tools' strict JSON
reader, the project's strict converter and, only when a public key is given, the
``cryptography`` package.

The tree is RFC 9162's (§2.1), over the trail's entries in order:

    leaf  = SHA-256(0x00 || canonical bytes of the entry's event)
    node  = SHA-256(0x01 || left || right)
    empty = SHA-256("")

A leaf is the event's canonical bytes, exactly what the hash chain hashes after the
previous head, and not the chain digest ``Hi``: ``Hi`` depends on ``H(i-1)`` and so on
every earlier entry, and an auditor holding one event could not recompute it. The
event alone yields its leaf; the proof's index and path place it in the tree, and the
checkpoint's ``head`` still ties the tree to the chain for whoever verifies the trail.
An entry's ``seq`` is its leaf index plus one.

Documents (checkpoints, proofs) are canonical JSON, like trail lines: sorted keys, no
spaces, ASCII, lower-case hex. A reformatted or re-encoded document is refused, so that
every changed byte shows; each names its format and version and the trail's chain id,
so a proof or checkpoint of another trail, or of another format, is refused too. An
event may come in any layout, but every text is read strictly
(:mod:`governed_memory.audit.strict_json`): an event with two equal keys would hash as
the recorded event while a reader keeping the first value sees another, so it is
refused (:class:`ProofDuplicateKeyError`), as are ``NaN`` and numbers written otherwise
than the canonical form writes them. Every refusal is a :class:`ProofError` whose
subclass says what failed.

The parts live beside this module: the refusals (``proof_errors``), the tree's hashes
and the two RFC algorithms (``tree_hashing``), the documents (``proof_documents``) and
public keys (``public_keys``). This module is what an auditor calls, and every name it
ever offered is still importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from governed_memory.audit.proof_documents import CHAIN_ID as CHAIN_ID
from governed_memory.audit.proof_documents import (
    CHECKPOINT_FORMAT,
    CONSISTENCY_FORMAT,
    INCLUSION_FORMAT,
    ConsistencyProof,
    InclusionProof,
    TreeCheckpoint,
    load_document,
)
from governed_memory.audit.proof_documents import DIGEST as DIGEST
from governed_memory.audit.proof_documents import MAX_PATH as MAX_PATH
from governed_memory.audit.proof_errors import (
    BadSignatureError,
    ForeignTrailError,
    KeyFileError,
    KeyMismatchError,
    LeafMismatchError,
    PathLengthError,
    ProofDocumentError,
    ProofDuplicateKeyError,
    ProofError,
    ProofFormatError,
    RootMismatchError,
    SignatureError,
    TreeSizeError,
    UnsignedCheckpointError,
    read_proof_json,
)
from governed_memory.audit.public_keys import SIGNATURE_ALGORITHM as SIGNATURE_ALGORITHM
from governed_memory.audit.public_keys import check_single_pem as check_single_pem
from governed_memory.audit.public_keys import key_id, load_public_key
from governed_memory.audit.strict_json import canonical_bytes
from governed_memory.audit.tree_hashing import (
    EMPTY_ROOT,
    check_consistency,
    leaf_hash,
    node_hash,
    root_from_inclusion,
)
from governed_memory.audit.tree_hashing import HASH_SIZE as HASH_SIZE
from governed_memory.audit.tree_hashing import LEAF_PREFIX as LEAF_PREFIX
from governed_memory.audit.tree_hashing import NODE_PREFIX as NODE_PREFIX
from governed_memory.audit.tree_hashing import split_point as split_point

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def event_leaf(event: Mapping[str, Any] | bytes | str) -> bytes:
    """The leaf hash of an event given as a JSON object or JSON text in any layout:
    both are brought to canonical bytes, which is what the chain hashed."""
    return leaf_hash(_event(event)[1])


def load_event(text: str | bytes, *, source: str = "the event") -> dict[str, Any]:
    """An event from its JSON text, in any layout but strictly read (``source`` names it
    in a refusal): what :func:`verify_inclusion` does with an event given as text."""
    value = read_proof_json(text, source)
    if not isinstance(value, dict):
        raise ProofFormatError(f"{source}: not a JSON object")
    return value


def _event(event: Mapping[str, Any] | bytes | str) -> tuple[dict[str, Any], bytes]:
    """The event as a JSON object and as its canonical bytes."""
    value = load_event(event) if isinstance(event, bytes | str) else dict(event)
    if not isinstance(value, dict):
        raise ProofFormatError("the event is not a JSON object")
    try:
        return value, canonical_bytes(value)
    except (TypeError, ValueError):
        raise ProofFormatError("the event holds a value JSON cannot represent") from None


# -- what an auditor calls ------------------------------------------------------------------


def _same_trail(*chain_ids: str) -> None:
    if len(set(chain_ids)) != 1:
        raise ForeignTrailError(f"the documents belong to different trails: "
                                f"{', '.join(sorted(set(chain_ids)))}")


def verify_inclusion(event: Mapping[str, Any] | bytes | str, proof: InclusionProof,
                     checkpoint: TreeCheckpoint, *,
                     public_key: Ed25519PublicKey | bytes | str | None = None) -> None:
    """Raise a :class:`ProofError` unless ``event`` was entry ``proof.seq`` of the trail
    when ``checkpoint`` was taken (and, given ``public_key``, its holder signed the
    checkpoint). ``event`` is the event's JSON object or text."""
    if public_key is not None:
        checkpoint.verify_signature(public_key)
    _same_trail(proof.chain_id, checkpoint.chain_id)
    if proof.tree_size != checkpoint.tree_size:
        raise TreeSizeError(f"the proof is for a tree of {proof.tree_size} entries, the "
                            f"checkpoint's has {checkpoint.tree_size}")
    value, body = _event(event)
    if value.get("event_id") != proof.event_id:
        raise LeafMismatchError(f"the proof is for event {proof.event_id}, not for "
                                f"{value.get('event_id')!r}")
    path = [bytes.fromhex(node) for node in proof.audit_path]
    root = root_from_inclusion(leaf_hash(body), proof.leaf_index, proof.tree_size, path)
    if root != checkpoint.root_bytes:
        raise RootMismatchError("the event, the path and the index do not hash to the "
                                "checkpoint's root (a wrong or altered event, an altered "
                                "or reordered path, a wrong index, or an altered "
                                "checkpoint)")


def verify_consistency(first: TreeCheckpoint, second: TreeCheckpoint,
                       proof: ConsistencyProof, *,
                       public_key: Ed25519PublicKey | bytes | str | None = None) -> None:
    """Raise a :class:`ProofError` unless the trail at ``second`` holds the trail at
    ``first`` unchanged as its beginning (and, given ``public_key``, its holder signed
    both checkpoints)."""
    if public_key is not None:
        first.verify_signature(public_key)
        second.verify_signature(public_key)
    _same_trail(proof.chain_id, first.chain_id, second.chain_id)
    if (proof.first_size, proof.second_size) != (first.tree_size, second.tree_size):
        raise TreeSizeError(f"the proof is from {proof.first_size} to {proof.second_size} "
                            f"entries, the checkpoints are of {first.tree_size} and "
                            f"{second.tree_size}")
    check_consistency(first.tree_size, second.tree_size, first.root_bytes,
                      second.root_bytes, [bytes.fromhex(node) for node in proof.path])


# ``__all__`` is the auditor's API. The names imported ``as`` themselves above are not
# part of it; they stay importable from here, where the prover's modules (merkle,
# proving, signing) import some of them.
__all__ = [
    "CHECKPOINT_FORMAT",
    "CONSISTENCY_FORMAT",
    "EMPTY_ROOT",
    "INCLUSION_FORMAT",
    "BadSignatureError",
    "ConsistencyProof",
    "ForeignTrailError",
    "InclusionProof",
    "KeyFileError",
    "KeyMismatchError",
    "LeafMismatchError",
    "PathLengthError",
    "ProofDocumentError",
    "ProofDuplicateKeyError",
    "ProofError",
    "ProofFormatError",
    "RootMismatchError",
    "SignatureError",
    "TreeCheckpoint",
    "TreeSizeError",
    "UnsignedCheckpointError",
    "check_consistency",
    "event_leaf",
    "key_id",
    "leaf_hash",
    "load_document",
    "load_event",
    "load_public_key",
    "node_hash",
    "read_proof_json",
    "root_from_inclusion",
    "verify_consistency",
    "verify_inclusion",
]
