"""The trail's Merkle checkpoint as a C2SP ``tlog-checkpoint`` in a signed note.

The note's text is exactly three lines, each ending in a newline::

    <origin>            the log's identity: by default governed-memory/<chain id>
    <tree size>         decimal, no leading zeroes
    <root hash>         standard base64 of the RFC 9162 root

followed by a blank line and the log key's Ed25519 signature line (named, by default,
as the origin is). The root is the one ``audit checkpoint`` computes (leaf =
SHA-256(0x00 || an event's canonical bytes)), so a C2SP checkpoint and the project's
JSON checkpoint of the same trail and size state the same tree. No extension line is
written (the spec advises against them: monitors cannot audit them); the JSON
checkpoint keeps what only this project reads, the chain's head and the time.
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Final

import attrs

from governed_memory.audit.notes import (
    Note,
    NoteFormatError,
    VerifierKey,
    check_key_name,
    sign,
    strict_b64decode,
)
from governed_memory.audit.proof_errors import RootMismatchError, TreeSizeError
from governed_memory.audit.tree_hashing import EMPTY_ROOT, HASH_SIZE

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from governed_memory.audit.proof_documents import TreeCheckpoint

ORIGIN_PREFIX: Final = "governed-memory/"
_SIZE: Final = re.compile(r"0|[1-9][0-9]{0,18}")


def default_origin(chain_id: str) -> str:
    """The origin a trail's checkpoints carry unless told otherwise: the chain id names
    the trail, and it never holds a space or a newline."""
    return ORIGIN_PREFIX + chain_id


def check_origin(origin: str) -> str:
    """An origin this project writes: what a key name may be (non-empty, no space, no
    ``+``), as the spec recommends, so it can name the log's key too."""
    return check_key_name(origin, "an origin")


@attrs.frozen(slots=True)
class LogCheckpoint:
    """A tlog-checkpoint's text: origin, tree size and root hash (and extension lines,
    read but never written here)."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if not self.origin or "\n" in self.origin:
            raise NoteFormatError("a checkpoint's origin is one non-empty line")
        if not 0 <= self.size < 2**63:
            raise NoteFormatError("a checkpoint's size is from 0 below 2**63")
        if len(self.root) != HASH_SIZE:
            raise NoteFormatError("a checkpoint's root is a 32-byte hash")
        if self.size == 0 and self.root != EMPTY_ROOT:
            raise NoteFormatError("the root of an empty tree is SHA-256 of nothing")
        if any(not line or "\n" in line for line in self.extensions):
            raise NoteFormatError("an extension line is one non-empty line")

    def text(self) -> str:
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode("ascii"),
                 *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str) -> LogCheckpoint:
        """The checkpoint a note's text states, refusing any other spelling of it."""
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "":
            raise NoteFormatError("a checkpoint is at least three newline-terminated lines: "
                                  "origin, tree size, root hash")
        origin, size, root, *extensions = lines[:-1]
        if _SIZE.fullmatch(size) is None:
            raise NoteFormatError(f"a checkpoint's tree size is a decimal number without "
                                  f"leading zeroes, not {size!r}")
        return cls(origin, int(size), strict_b64decode(root, "the checkpoint's root hash"),
                   tuple(extensions))

    def matches(self, checkpoint: TreeCheckpoint) -> None:
        """Refuse unless ``checkpoint`` (the JSON one) states this tree."""
        if checkpoint.tree_size != self.size:
            raise TreeSizeError(f"the note is of a tree of {self.size} entries, the "
                                f"checkpoint's has {checkpoint.tree_size}")
        if checkpoint.root_bytes != self.root:
            raise RootMismatchError("the note and the checkpoint state different roots "
                                    "for the same size (another history, or an altered "
                                    "document)")


def read_checkpoint_note(data: bytes | str) -> tuple[Note, LogCheckpoint]:
    note = Note.parse(data)
    return note, LogCheckpoint.parse(note.text)


def checkpoint_note(checkpoint: TreeCheckpoint, key: Ed25519PrivateKey, *,
                    origin: str | None = None, key_name: str | None = None) -> Note:
    """``checkpoint``'s tree as a C2SP checkpoint signed by ``key``. The key is named
    ``key_name``, by default the origin, itself by default ``governed-memory/<chain id>``."""
    body = LogCheckpoint(check_origin(origin or default_origin(checkpoint.chain_id)),
                         checkpoint.tree_size, checkpoint.root_bytes)
    return signed_checkpoint(body, key, key_name)


def signed_checkpoint(body: LogCheckpoint, key: Ed25519PrivateKey,
                      key_name: str | None = None) -> Note:
    name = check_key_name(key_name or body.origin, "the log key's name")
    text = body.text()
    return Note(text, (sign(text, key, name),))


def log_verifier_key(key: Ed25519PrivateKey, origin: str, key_name: str | None = None
                     ) -> VerifierKey:
    """The verifier key an auditor is handed for the notes :func:`checkpoint_note` signs."""
    return VerifierKey.of(key_name or origin, key)
