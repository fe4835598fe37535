"""Ed25519 public keys, as an auditor is handed them: PEM text, and a fingerprint.

Only these are needed to check a signed checkpoint; making keys and signing live in
:mod:`governed_memory.audit.signing`. ``cryptography`` is imported only when a key is
actually read, so checking an unsigned proof needs nothing beyond the standard library.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from governed_memory.audit.proof_errors import KeyFileError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SIGNATURE_ALGORITHM: Final = "ed25519"


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

