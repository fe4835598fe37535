"""What a refusal of a proof, checkpoint or key says, by subclass.

An auditor's tooling must tell a forged signature from a document of another trail or
a truncated path without parsing messages, so each way a check fails has its own
:class:`ProofError` subclass, and every message is safe to show. A text that is not
strict JSON is refused as a :class:`ProofDocumentError` (or, for two equal keys, a
:class:`ProofDuplicateKeyError`), which are also the strict JSON reader's errors, so
callers that catch either family catch it.
"""

from __future__ import annotations

from typing import Any

from governed_memory.audit.strict_json import DuplicateKeyError, JsonDocumentError, read_json


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


def read_proof_json(text: str | bytes, document: str) -> Any:
    """:func:`~governed_memory.audit.strict_json.read_json` raising this module's
    errors (:class:`ProofDocumentError`, :class:`ProofDuplicateKeyError`)."""
    return read_json(text, document, error=ProofDocumentError,
                     duplicate=ProofDuplicateKeyError)

