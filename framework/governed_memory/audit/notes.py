"""Signed notes (C2SP ``signed-note``), the envelope the open transparency-log tools read.

A note is UTF-8 text ending in a newline, a blank line, then one or more signature
lines ``— <key name> base64(key id || signature)``. The key id is the first four bytes
of ``SHA-256(key name || 0x0A || signature type || public key)``, so a verifier that
holds the (name, public key) pair recognises its signature without trying every key.
Two signature types are spoken here, both Ed25519 over keys made by ``audit keygen``:

- ``0x01``, the log's own signature, over the note text;
- ``0x04``, a witness's ``cosignature/v1`` (C2SP ``tlog-cosignature``): a big-endian
  u64 timestamp then the signature over ``cosignature/v1\\ntime <t>\\n`` + the text.

A key is handed to a verifier as a *verifier key* (``<name>+<hex key id>+<base64(type
|| public key)>``), the form Go's ``golang.org/x/mod/sumdb/note`` and the witness
network use. Verification follows the spec to the letter: a signature by a key that is
not known is ignored, one by a known key that does not verify rejects the whole note,
and a note no known key signed is rejected. Every refusal is a ``ProofError`` subclass,
so the audit commands tell it as ``REFUSED`` like any other proof that does not hold.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

import attrs

from governed_memory.audit.proof_errors import (
    BadSignatureError,
    KeyMismatchError,
    ProofFormatError,
    SignatureError,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

ED25519: Final = 0x01
"""Signature type of a plain Ed25519 note signature (the log's)."""
COSIGNATURE_V1: Final = 0x04
"""Signature type of a timestamped Ed25519 witness cosignature (``cosignature/v1``)."""
DASH: Final = "\u2014 "
MAX_SIGNATURES: Final = 100
"""The spec asks verifiers to accept at least 16; Go's verifier stops at 100."""
MAX_NOTE_BYTES: Final = 1 << 20
_COSIGNATURE_HEADER: Final = b"cosignature/v1\n"
_TYPES: Final = {ED25519: "Ed25519", COSIGNATURE_V1: "cosignature/v1"}


class NoteFormatError(ProofFormatError):
    """Not a well-formed signed note, verifier key or key name."""


class WitnessQuorumError(SignatureError):
    """Fewer valid cosignatures by distinct required witnesses than the policy asks."""


def check_key_name(name: str, what: str = "a key name") -> str:
    """``name`` if it can name a key: non-empty, no Unicode space, no ``+``."""
    if not name or "+" in name or any(ch.isspace() or ch < " " for ch in name):
        raise NoteFormatError(f"{what} must be non-empty, without spaces or '+': {name!r}")
    return name


def key_id(name: str, signature_type: int, public_key: bytes) -> int:
    """The spec's key id: the first four bytes, big-endian, of SHA-256(name || 0x0A ||
    type || public key)."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([signature_type])
                            + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def raw_public_key(key: Ed25519PublicKey | Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@attrs.frozen(slots=True)
class VerifierKey:
    """A named Ed25519 public key, for one signature type: what a verifier trusts."""

    name: str
    signature_type: int
    public_key: bytes

    def __attrs_post_init__(self) -> None:
        check_key_name(self.name)
        if self.signature_type not in _TYPES:
            raise NoteFormatError(f"signature type 0x{self.signature_type:02x} is not "
                                  "Ed25519 (0x01) nor cosignature/v1 (0x04)")
        if len(self.public_key) != 32:
            raise NoteFormatError("an Ed25519 public key is 32 bytes")

    @property
    def key_id(self) -> int:
        return key_id(self.name, self.signature_type, self.public_key)

    @property
    def cosigner(self) -> bool:
        return self.signature_type == COSIGNATURE_V1

    @classmethod
    def of(cls, name: str, key: Ed25519PublicKey | Ed25519PrivateKey | bytes, *,
           cosigner: bool = False) -> VerifierKey:
        raw = key if isinstance(key, bytes) else raw_public_key(key)
        return cls(name, COSIGNATURE_V1 if cosigner else ED25519, raw)

    def text(self) -> str:
        """``<name>+<hex key id>+<base64(type || public key)>``."""
        material = base64.b64encode(bytes([self.signature_type]) + self.public_key)
        return f"{self.name}+{self.key_id:08x}+{material.decode('ascii')}"

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        """A verifier key from its text, its stated key id checked against the key."""
        parts = text.strip().split("+", 2)
        if len(parts) != 3 or len(parts[1]) != 8:
            raise NoteFormatError("a verifier key is <name>+<8 hex digits>+<base64 key>")
        name, stated, material = parts
        try:
            stated_id = int(stated, 16)
            raw = strict_b64decode(material, "the verifier key's key")
        except ValueError:
            raise NoteFormatError("a verifier key's key id is 8 hex digits") from None
        if len(raw) < 2:
            raise NoteFormatError("the verifier key holds no key")
        key = cls(name, raw[0], raw[1:])
        if key.key_id != stated_id:
            raise NoteFormatError(f"verifier key {name}: key id {stated} is not the key's "
                                  f"({key.key_id:08x})")
        return key

    def verify(self, text: bytes, signature: bytes) -> int | None:
        """Whether ``signature`` (after the key id) is this key's over note ``text``:
        ``None`` for a plain signature, the timestamp for a cosignature; raises
        :class:`BadSignatureError` otherwise."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        timestamp: int | None = None
        message = text
        if self.cosigner:
            if len(signature) != 8 + 64:
                raise BadSignatureError(f"{self.name}: a cosignature/v1 is 72 bytes, not "
                                        f"{len(signature)}")
            (timestamp,) = struct.unpack(">Q", signature[:8])
            if timestamp >= 1 << 63:
                raise BadSignatureError(f"{self.name}: the cosignature's time is past 2**63")
            message, signature = cosigned_message(text, timestamp), signature[8:]
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except InvalidSignature:
            raise BadSignatureError(f"the signature by {self.name} does not verify: the "
                                    "note was altered after it was signed, or forged") from None
        return timestamp


def cosigned_message(text: bytes, timestamp: int) -> bytes:
    """What a ``cosignature/v1`` signs: two header lines, then the whole note text."""
    return _COSIGNATURE_HEADER + b"time %d\n" % timestamp + text


@attrs.frozen(slots=True)
class NoteSignature:
    name: str
    key_id: int
    signature: bytes
    """The bytes after the key id (for a cosignature: timestamp, then signature)."""

    def line(self) -> str:
        blob = base64.b64encode(self.key_id.to_bytes(4, "big") + self.signature)
        return f"{DASH}{self.name} {blob.decode('ascii')}\n"


@attrs.frozen(slots=True)
class Note:
    """A note's text (ending in a newline) and its signatures, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def to_bytes(self) -> bytes:
        return (self.text + "\n" + "".join(s.line() for s in self.signatures)).encode("utf-8")

    def with_signature(self, signature: NoteSignature) -> Note:
        """The note with ``signature`` added, replacing one by the same key."""
        kept = tuple(s for s in self.signatures
                     if (s.name, s.key_id) != (signature.name, signature.key_id))
        return Note(self.text, (*kept, signature))

    @classmethod
    def parse(cls, data: bytes | str) -> Note:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(raw) > MAX_NOTE_BYTES:
            raise NoteFormatError(f"a note of {len(raw)} bytes is past the limit")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise NoteFormatError("a note is UTF-8 text") from None
        if any(ch < " " and ch != "\n" for ch in text):
            raise NoteFormatError("a note holds no control character but newlines")
        split = text.rfind("\n\n")
        if split < 0 or not text.endswith("\n"):
            raise NoteFormatError("not a signed note: no blank line before signature lines, "
                                  "or no final newline")
        body, block = text[:split + 1], text[split + 2:]
        lines = block.split("\n")[:-1]
        if not lines:
            raise NoteFormatError("a signed note has at least one signature line")
        if len(lines) > MAX_SIGNATURES:
            raise NoteFormatError(f"a note with {len(lines)} signatures is past the limit")
        return cls(body, tuple(_signature_line(line) for line in lines))

    def verify(self, known: Iterable[VerifierKey]) -> list[Verified]:
        """The signatures of known keys, each verified; the others are ignored. Raises
        :class:`BadSignatureError` if one of a known key fails (the whole note is
        refused), :class:`KeyMismatchError` if no known key signed."""
        by_id = {(k.name, k.key_id): k for k in known}
        text = self.text.encode("utf-8")
        verified: dict[tuple[str, int], Verified] = {}
        for signature in self.signatures:
            key = by_id.get((signature.name, signature.key_id))
            if key is None:
                continue
            timestamp = key.verify(text, signature.signature)
            verified.setdefault((key.name, key.key_id), Verified(key, timestamp))
        if not verified:
            names = ", ".join(sorted({s.name for s in self.signatures}))
            raise KeyMismatchError(f"no signature by a known key: the note is signed by "
                                   f"{names}")
        return list(verified.values())


@attrs.frozen(slots=True)
class Verified:
    key: VerifierKey
    timestamp: int | None
    """A cosignature's time (POSIX seconds); ``None`` for a plain signature."""


def strict_b64decode(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise NoteFormatError(f"{what} is not base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise NoteFormatError(f"{what} is not in canonical base64")
    return raw


def _signature_line(line: str) -> NoteSignature:
    if not line.startswith(DASH):
        raise NoteFormatError("a signature line starts with an em dash and a space")
    name, _, blob = line[len(DASH):].partition(" ")
    check_key_name(name, "a signature's key name")
    raw = strict_b64decode(blob, f"the signature by {name}")
    if len(raw) < 5:
        raise NoteFormatError(f"the signature by {name} is too short")
    return NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:])


def sign(text: str, key: Ed25519PrivateKey, name: str) -> NoteSignature:
    """The log's plain Ed25519 signature of note ``text``, by ``key`` named ``name``."""
    verifier = VerifierKey.of(name, key)
    return NoteSignature(name, verifier.key_id, key.sign(text.encode("utf-8")))


def cosign(text: str, key: Ed25519PrivateKey, name: str, timestamp: int) -> NoteSignature:
    """A witness's ``cosignature/v1`` of note ``text`` at POSIX time ``timestamp``."""
    if not 0 <= timestamp < 1 << 63:
        raise NoteFormatError("a cosignature's time is from 0 below 2**63")
    verifier = VerifierKey.of(name, key, cosigner=True)
    signature = key.sign(cosigned_message(text.encode("utf-8"), timestamp))
    return NoteSignature(name, verifier.key_id, struct.pack(">Q", timestamp) + signature)


def require_quorum(note: Note, witnesses: Sequence[VerifierKey], quorum: int) -> list[Verified]:
    """The valid cosignatures of ``note`` by distinct ``witnesses``; raises
    :class:`WitnessQuorumError` when fewer than ``quorum``. A witness key's
    cosignature that does not verify refuses the note, as any known key's would."""
    if not 0 <= quorum <= len(witnesses):
        raise NoteFormatError(f"a quorum of {quorum} cannot be met by {len(witnesses)} "
                              "witness key(s)")
    if any(not w.cosigner for w in witnesses):
        raise NoteFormatError("a witness key is a cosignature/v1 verifier key (type 0x04)")
    try:
        verified = note.verify(witnesses)
    except KeyMismatchError:
        verified = []
    if len(verified) < quorum:
        seen = ", ".join(v.key.name for v in verified) or "none"
        raise WitnessQuorumError(f"{len(verified)} of the {len(witnesses)} witnesses "
                                 f"cosigned (by: {seen}); the policy requires {quorum}")
    return verified
