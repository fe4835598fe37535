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
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import attrs

from governed_memory.audit.strict_json import (
    DuplicateKeyError,
    JsonDocumentError,
    canonical_bytes,
    read_json,
)
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryValidationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

CHECKPOINT_FORMAT: Final = "governed-memory-checkpoint/1"
INCLUSION_FORMAT: Final = "governed-memory-inclusion-proof/1"
CONSISTENCY_FORMAT: Final = "governed-memory-consistency-proof/1"
SIGNATURE_ALGORITHM: Final = "ed25519"

HASH_SIZE: Final = 32
MAX_PATH: Final = 64
"""No tree of at most 2**63 leaves needs a longer path, so a longer one is refused unread."""
LEAF_PREFIX: Final = b"\x00"
NODE_PREFIX: Final = b"\x01"
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_SIGNATURE: Final = re.compile(r"[0-9a-f]{128}")
_KEY_ID: Final = re.compile(r"ed25519:[0-9a-f]{64}")
_CHAIN_ID: Final = re.compile(r"[\x21-\x7e]{1,255}")
_MAGIC: Final = b"GMIP\x01"
"""The compact inclusion proof's first bytes: its format and version."""

T = TypeVar("T")


# -- what a refusal says --------------------------------------------------------------------


class ProofError(ValueError):
    """A proof or checkpoint that does not hold. The message is safe to show."""


class ProofFormatError(ProofError):
    """Not a well-formed document of a known format and version (or not canonical)."""


class ProofDocumentError(ProofFormatError, JsonDocumentError):
    """An event, proof or checkpoint text that is not strict JSON: not JSON at all
    (``code`` ``invalid_json``), or JSON the canonical form never writes, such as
    ``NaN``, a byte order mark, ``1E2`` or data after the value
    (``non_canonical_json``). ``document`` names it."""


class ProofDuplicateKeyError(ProofDocumentError, DuplicateKeyError):
    """An event, proof or checkpoint text with two equal keys in one object, at any
    depth: it could verify as one document and read as another. ``key`` and ``where``
    (the object's path, ``$`` for the top level) say which."""


class ForeignTrailError(ProofError):
    """The proof and checkpoint(s) name different trails (chain ids)."""


class TreeSizeError(ProofError):
    """Index or tree sizes that do not fit: an index past the tree, a proof for another
    tree size than the checkpoint's, a later checkpoint smaller than the earlier."""


class PathLengthError(ProofError):
    """The path is longer or shorter than the tree's shape allows for that index and
    size (a shortened or extended path)."""


class LeafMismatchError(ProofError):
    """The event given is not the one the proof is for."""


class RootMismatchError(ProofError):
    """The event, path and index do not hash to the checkpoint's root: a wrong leaf, a
    reordered or altered path, a wrong index, or an altered checkpoint."""


class SignatureError(ProofError):
    """The checkpoint's signature does not establish it came from the key's holder."""


class UnsignedCheckpointError(SignatureError):
    """A key was given, so a signature was required, and the checkpoint has none."""


class KeyMismatchError(SignatureError):
    """The checkpoint names another signing key than the one given."""


class BadSignatureError(SignatureError):
    """The signature does not verify: the checkpoint was altered, or forged."""


class KeyFileError(ValueError):
    """A key that cannot be used (unreadable, not Ed25519, readable by others). The
    message names the file, never the key's bytes."""


# -- hashing (RFC 9162 §2.1.1) -----------------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def event_leaf(event: Mapping[str, Any] | bytes | str) -> bytes:
    """The leaf hash of an event given as a JSON object or JSON text in any layout:
    both are brought to canonical bytes, which is what the chain hashed."""
    return leaf_hash(_event(event)[1])


def read_proof_json(text: str | bytes, document: str) -> Any:
    """:func:`~governed_memory.audit.strict_json.read_json` raising this module's
    errors (:class:`ProofDocumentError`, :class:`ProofDuplicateKeyError`)."""
    return read_json(text, document, error=ProofDocumentError,
                     duplicate=ProofDuplicateKeyError)


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


def split_point(size: int) -> int:
    """The largest power of two smaller than ``size`` (``size`` > 1): where RFC 9162
    splits a tree, so that every left subtree is perfect."""
    return 1 << ((size - 1).bit_length() - 1)


# -- verification algorithms (RFC 9162 §2.1.3.2 and §2.1.4.2) ---------------------------------


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


# -- field checks ----------------------------------------------------------------------------


def _matches(pattern: re.Pattern[str], what: str) -> Any:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, str) or pattern.fullmatch(value) is None:
            raise ValueError(f"{attribute.name} must be {what}")

    return check


def _optional_matches(pattern: re.Pattern[str], what: str) -> Any:
    inner = _matches(pattern, what)

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None:
            inner(instance, attribute, value)

    return check


def _constant(expected: str) -> Any:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value != expected:
            raise ValueError(f"{attribute.name} must be {expected!r}, got {value!r}")

    return check


def _count(minimum: int) -> Any:
    def check(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not (
                minimum <= value < 2**63):
            raise ValueError(f"{attribute.name} must be an integer from {minimum} "
                             "below 2**63")

    return check


def _digests(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or len(value) > MAX_PATH or not all(
            isinstance(item, str) and _DIGEST.fullmatch(item) for item in value):
        raise ValueError(f"{attribute.name} must be at most {MAX_PATH} lower-case "
                         "SHA-256 hex digests")


def _finite(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, float) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number")


CHAIN_ID: Final = _matches(_CHAIN_ID, "1-255 printable ASCII characters")
DIGEST: Final = _matches(_DIGEST, "a lower-case SHA-256 hex digest")


# -- documents -----------------------------------------------------------------------------


def _load(text: str | bytes, kind: type[T], fmt: str, source: str | None) -> T:
    """A document from its canonical JSON text, refusing any other text for it."""
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    raw = raw.removesuffix(b"\n")
    value = read_proof_json(raw, source or f"a {fmt} document")
    if not isinstance(value, dict) or value.get("format") != fmt:
        found = value.get("format") if isinstance(value, dict) else None
        raise ProofFormatError(f"not a {fmt} document (format {found!r})")
    try:
        canonical = canonical_bytes(value)
    except ValueError:
        raise ProofFormatError(f"{fmt}: holds a value JSON cannot represent") from None
    loaded = _structure(value, kind, fmt)
    if canonical != raw or _text(loaded).encode("ascii") != raw:
        # the second: a value the converter would normalize, such as 5 for 5.0
        raise ProofFormatError(f"{fmt}: not in canonical form (sorted keys, no spaces, "
                               "ASCII, exact types): the document was edited or re-encoded")
    return loaded


def _structure(value: dict[str, Any], kind: type[T], fmt: str) -> T:
    expected = {field.name for field in attrs.fields(cast(Any, kind))}
    if set(value) != expected:
        raise ProofFormatError(f"{fmt}: has fields {sorted(value)}, expected "
                               f"{sorted(expected)}")
    try:
        return structure(value, kind)
    except MemoryValidationError as exc:
        raise ProofFormatError(f"{fmt}: {exc}") from None


def _text(value: object) -> str:
    return canonical_bytes(unstructure(value)).decode("ascii")


@attrs.frozen(slots=True)
class TreeCheckpoint:
    """The trail's Merkle root and chain head after ``tree_size`` entries, optionally
    signed (Ed25519) by the key ``key_id`` names. Kept where the trail's writers cannot
    reach, it is what proofs are checked against: it commits to every entry up to its
    size and, signed, to who vouched for that."""

    chain_id: str = attrs.field(validator=CHAIN_ID)
    tree_size: int = attrs.field(validator=_count(0))
    root: str = attrs.field(validator=DIGEST)
    """Hex of the RFC 9162 Merkle tree hash over the first ``tree_size`` events."""
    head: str = attrs.field(validator=DIGEST)
    """The hash chain's head after entry ``tree_size`` (its genesis hash for 0)."""
    created_at: float = attrs.field(validator=_finite)
    key_id: str | None = attrs.field(
        default=None, validator=_optional_matches(_KEY_ID, "ed25519: and a SHA-256 hex "
                                                           "digest of the public key"))
    signature: str | None = attrs.field(
        default=None, validator=_optional_matches(_SIGNATURE, "128 lower-case hex digits"))
    format: str = attrs.field(default=CHECKPOINT_FORMAT, validator=_constant(CHECKPOINT_FORMAT))

    def __attrs_post_init__(self) -> None:
        if (self.key_id is None) != (self.signature is None):
            raise ValueError("key_id and signature come together or not at all")
        if self.tree_size == 0 and self.root != EMPTY_ROOT.hex():
            raise ValueError("the root of an empty tree is SHA-256 of nothing")

    @property
    def signed(self) -> bool:
        return self.signature is not None

    @property
    def root_bytes(self) -> bytes:
        return bytes.fromhex(self.root)

    def to_json(self) -> str:
        return _text(self)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str | None = None) -> TreeCheckpoint:
        """The document from its canonical JSON text; ``source`` (a file name, say)
        names it in a refusal."""
        return _load(text, cls, CHECKPOINT_FORMAT, source)

    def signed_bytes(self, key_id: str) -> bytes:
        """What the signature covers: every field but the signature, with ``key_id``,
        in canonical form. Naming the key inside keeps a signature from being passed
        off as another key's."""
        body = unstructure(self)
        body.pop("signature")
        body["key_id"] = key_id
        return canonical_bytes(body)

    def unsigned(self) -> TreeCheckpoint:
        return attrs.evolve(self, key_id=None, signature=None)

    def verify_signature(self, public_key: Ed25519PublicKey | bytes | str) -> None:
        """Raise a :class:`SignatureError` unless ``public_key``'s holder signed this."""
        key = load_public_key(public_key)
        if self.signature is None or self.key_id is None:
            raise UnsignedCheckpointError("the checkpoint is not signed, and a signature "
                                          "by the given key is required")
        wanted = key_id(key)
        if self.key_id != wanted:
            raise KeyMismatchError(f"the checkpoint was signed by key {self.key_id}, not "
                                   f"by the given key {wanted}")
        from cryptography.exceptions import InvalidSignature

        try:
            key.verify(bytes.fromhex(self.signature), self.signed_bytes(self.key_id))
        except InvalidSignature:
            raise BadSignatureError("the signature does not verify: the checkpoint was "
                                    "altered after it was signed, or forged") from None


@attrs.frozen(slots=True)
class InclusionProof:
    """That the event ``event_id`` is leaf ``leaf_index`` of the tree of ``tree_size``
    entries: the audit path (RFC 9162 §2.1.3.1), sibling hashes from the leaf up."""

    chain_id: str = attrs.field(validator=CHAIN_ID)
    event_id: str = attrs.field(validator=_matches(_CHAIN_ID, "1-255 printable ASCII "
                                                              "characters"))
    leaf_index: int = attrs.field(validator=_count(0))
    tree_size: int = attrs.field(validator=_count(1))
    audit_path: tuple[str, ...] = attrs.field(validator=_digests)
    format: str = attrs.field(default=INCLUSION_FORMAT, validator=_constant(INCLUSION_FORMAT))

    @property
    def seq(self) -> int:
        """The entry number in the trail (``seq`` of its chain line)."""
        return self.leaf_index + 1

    def to_json(self) -> str:
        return _text(self)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str | None = None) -> InclusionProof:
        """The document from its canonical JSON text; ``source`` (a file name, say)
        names it in a refusal."""
        return _load(text, cls, INCLUSION_FORMAT, source)

    def to_bytes(self) -> bytes:
        """The compact form (the layout of RFC 9162 §4.12's inclusion proof, with our
        magic and the event id): under 1 KB for a trail of 2**20 entries.

        ``"GMIP" 0x01 | len u8, chain id | len u8, event id | tree_size u64 |
        leaf_index u64 | count u8 | count x 32 bytes``, big-endian."""
        chain, event = self.chain_id.encode("ascii"), self.event_id.encode("ascii")
        return b"".join([_MAGIC, bytes([len(chain)]), chain, bytes([len(event)]), event,
                         struct.pack(">QQB", self.tree_size, self.leaf_index,
                                     len(self.audit_path)),
                         *(bytes.fromhex(node) for node in self.audit_path)])

    @classmethod
    def from_bytes(cls, data: bytes) -> InclusionProof:
        fmt = "compact inclusion proof"
        if not data.startswith(_MAGIC):
            raise ProofFormatError(f"not a {fmt} (magic or version)")
        at = len(_MAGIC)
        texts = []
        for _ in range(2):
            if at >= len(data):
                raise ProofFormatError(f"{fmt}: cut short")
            length = data[at]
            chunk = data[at + 1:at + 1 + length]
            if len(chunk) != length:
                raise ProofFormatError(f"{fmt}: cut short")
            try:
                texts.append(chunk.decode("ascii"))
            except UnicodeDecodeError:
                raise ProofFormatError(f"{fmt}: an id is not ASCII") from None
            at += 1 + length
        if len(data) < at + 17:
            raise ProofFormatError(f"{fmt}: cut short")
        tree_size, leaf_index, count = struct.unpack_from(">QQB", data, at)
        at += 17
        if len(data) != at + count * HASH_SIZE:
            raise ProofFormatError(f"{fmt}: {len(data) - at} bytes of path for {count} "
                                   "hashes")
        path = tuple(data[i:i + HASH_SIZE].hex() for i in range(at, len(data), HASH_SIZE))
        try:
            return cls(texts[0], texts[1], leaf_index, tree_size, path)
        except (TypeError, ValueError) as exc:
            raise ProofFormatError(f"{fmt}: {exc}") from None


@attrs.frozen(slots=True)
class ConsistencyProof:
    """That the tree of ``second_size`` entries extends the tree of ``first_size``: the
    RFC 9162 §2.1.4.1 consistency path."""

    chain_id: str = attrs.field(validator=CHAIN_ID)
    first_size: int = attrs.field(validator=_count(0))
    second_size: int = attrs.field(validator=_count(0))
    path: tuple[str, ...] = attrs.field(validator=_digests)
    format: str = attrs.field(default=CONSISTENCY_FORMAT,
                              validator=_constant(CONSISTENCY_FORMAT))

    def to_json(self) -> str:
        return _text(self)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str | None = None) -> ConsistencyProof:
        """The document from its canonical JSON text; ``source`` (a file name, say)
        names it in a refusal."""
        return _load(text, cls, CONSISTENCY_FORMAT, source)


def load_document(text: str | bytes, *, source: str | None = None
                  ) -> TreeCheckpoint | InclusionProof | ConsistencyProof:
    """Whichever of the three documents ``text`` is, by its ``format``; ``source``
    names it in a refusal."""
    value = read_proof_json(text, source or "a checkpoint or proof")
    kinds: dict[str, Any] = {CHECKPOINT_FORMAT: TreeCheckpoint,
                             INCLUSION_FORMAT: InclusionProof,
                             CONSISTENCY_FORMAT: ConsistencyProof}
    kind = kinds.get(str(value.get("format"))) if isinstance(value, dict) else None
    if kind is None:
        prefix = f"{source}: " if source else ""
        raise ProofFormatError(f"{prefix}not a governed-memory checkpoint or proof "
                               "(unknown format)")
    loaded: TreeCheckpoint | InclusionProof | ConsistencyProof = kind.from_json(
        text, source=source)
    return loaded


# -- keys --------------------------------------------------------------------------------


def check_single_pem(data: bytes | bytearray, what: str) -> None:
    """Refuse key data holding more than one PEM block (which key would be meant?)."""
    blocks = data.count(b"-----BEGIN ")
    if blocks > 1:
        raise KeyFileError(f"holds {blocks} PEM blocks, and a {what} file holds one key")


def load_public_key(key: Ed25519PublicKey | bytes | str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (SubjectPublicKeyInfo) text or bytes, or as is.
    PEM holding more than one block is refused: the parser would take the first key,
    another tool perhaps the last, and a signature must be checked against one key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if isinstance(key, Ed25519PublicKey):
        return key
    data = key.encode("ascii", "replace") if isinstance(key, str) else key
    check_single_pem(data, "public key")
    try:
        loaded = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise KeyFileError("not a PEM public key") from None
    if not isinstance(loaded, Ed25519PublicKey):
        raise KeyFileError("not an Ed25519 public key")
    return loaded


def key_id(public_key: Ed25519PublicKey | bytes | str) -> str:
    """The key's fingerprint: ``ed25519:`` + SHA-256 of its 32 raw bytes."""
    from cryptography.hazmat.primitives import serialization

    raw = load_public_key(public_key).public_bytes(serialization.Encoding.Raw,
                                                   serialization.PublicFormat.Raw)
    return f"{SIGNATURE_ALGORITHM}:{hashlib.sha256(raw).hexdigest()}"


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
