"""The three documents of the proof format: a (signed) checkpoint of the trail's Merkle
tree, an inclusion proof and a consistency proof.

Each is canonical JSON, like a trail line: sorted keys, no spaces, ASCII, lower-case
hex. A reformatted or re-encoded document is refused, so that every changed byte
shows; each names its format and version and the trail's chain id, so a document of
another trail, or of another format, is refused too. Every field is checked on the way
in (an attrs validator), so a document that loads is one this project could have
written. The inclusion proof also has a compact binary form.
"""

from __future__ import annotations

import math
import re
import struct
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import attrs

from governed_memory.audit.proof_errors import (
    BadSignatureError,
    KeyMismatchError,
    ProofFormatError,
    UnsignedCheckpointError,
    read_proof_json,
)
from governed_memory.audit.public_keys import key_id, load_public_key
from governed_memory.audit.strict_json import canonical_bytes
from governed_memory.audit.tree_hashing import EMPTY_ROOT, HASH_SIZE
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryValidationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

CHECKPOINT_FORMAT: Final = "governed-memory-checkpoint/1"
INCLUSION_FORMAT: Final = "governed-memory-inclusion-proof/1"
CONSISTENCY_FORMAT: Final = "governed-memory-consistency-proof/1"

MAX_PATH: Final = 64
"""No tree of at most 2**63 leaves needs a longer path, so a longer one is refused unread."""

_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_SIGNATURE: Final = re.compile(r"[0-9a-f]{128}")
_KEY_ID: Final = re.compile(r"ed25519:[0-9a-f]{64}")
_CHAIN_ID: Final = re.compile(r"[\x21-\x7e]{1,255}")
_MAGIC: Final = b"GMIP\x01"
"""The compact inclusion proof's first bytes: its format and version."""

T = TypeVar("T")


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
