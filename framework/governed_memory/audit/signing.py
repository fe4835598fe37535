"""Ed25519 keys for signing checkpoints: making, loading and using them.

The signer's half (the auditor's is ``TreeCheckpoint.verify_signature``). Keys are
files, PEM: the private key PKCS 8 and unencrypted, the public key SubjectPublicKeyInfo,
the forms ``openssl genpkey -algorithm ed25519`` and ``openssl pkey -pubout`` write.
A private key file that its group or others may read or write is refused, as ssh
refuses one: a signature proves only as much as the key is kept; so is a key file of
more than one PEM block (which key it means would depend on the reader). No key material is
ever printed, logged, put into an error message or written anywhere but the key files
``generate_key_pair`` creates; the trail and checkpoints carry only the key id (a
SHA-256 fingerprint of the public key). ``cryptography`` is imported here, and only
here and in the verifier when a key is given (extra ``signing``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from governed_memory.audit.proofs import (
    KeyFileError,
    TreeCheckpoint,
    check_single_pem,
    key_id,
    load_public_key,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

_MISSING_EXTRA = ("signing checkpoints needs the cryptography package: "
                  "pip install 'governed-memory[signing]'")


def _crypto() -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise KeyFileError(_MISSING_EXTRA) from None


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path``, refused when others may read it."""
    _crypto()
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    where = Path(path)
    try:
        with open(where, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise KeyFileError(f"{where}: the private key file may be read or written "
                                   f"by its group or others (mode {stat.filemode(mode)}); "
                                   f"chmod 600 {where}")
            data = bytearray(handle.read())
    except OSError as exc:
        raise KeyFileError(f"{where}: cannot read the private key ({exc.strerror})") from None
    try:
        check_single_pem(data, "private key")
    except KeyFileError as exc:
        data[:] = bytes(len(data))
        raise KeyFileError(f"{where}: {exc}") from None
    try:
        key = serialization.load_pem_private_key(bytes(data), password=None)
    except TypeError:
        raise KeyFileError(f"{where}: the private key is encrypted; give an unencrypted "
                           "PKCS 8 PEM key file (mode 600)") from None
    except (ValueError, UnsupportedAlgorithm):
        raise KeyFileError(f"{where}: not a PEM private key") from None
    finally:
        data[:] = bytes(len(data))  # the copy we hold; the parsed key lives on in C
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{where}: not an Ed25519 private key")
    return key


def load_public_key_file(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    _crypto()
    where = Path(path)
    try:
        data = where.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{where}: cannot read the public key ({exc.strerror})") from None
    try:
        return load_public_key(data)
    except KeyFileError as exc:
        raise KeyFileError(f"{where}: {exc}") from None


def sign_checkpoint(checkpoint: TreeCheckpoint, key: Ed25519PrivateKey) -> TreeCheckpoint:
    """``checkpoint`` signed by ``key`` (any earlier signature replaced)."""
    kid = key_id(key.public_key())
    signature = key.sign(checkpoint.signed_bytes(kid))
    return attrs.evolve(checkpoint, key_id=kid, signature=signature.hex())


def generate_key_pair(private_path: str | os.PathLike[str],
                      public_path: str | os.PathLike[str]) -> str:
    """Write a new key pair (the private key mode 600) and return its key id. Neither
    file may exist: an existing key is never overwritten."""
    _crypto()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private, public = Path(private_path), Path(public_path)
    if private.resolve() == public.resolve():
        raise KeyFileError("the private and the public key need two different files")
    for path in (private, public):
        if path.exists():
            raise KeyFileError(f"{path}: exists; a key file is never overwritten")
    key = Ed25519PrivateKey.generate()
    _write_new(private, key.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()), 0o600)
    try:
        _write_new(public, key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
            0o644)
    except BaseException:
        private.unlink()
        raise
    return key_id(key.public_key())


def _write_new(path: Path, data: bytes, mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot create ({exc.strerror})") from None
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed or, for 600, nothing else
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
