"""The hash chain: how a trail's lines are shaped and hashed.

A trail is JSON lines in one or more files. The first file opens with a *genesis*
line; each later file opens with a *continue* line that restates the chain's head, so
rotation never breaks the chain; every other line is an *entry* holding one event::

    genesis   H0 = sha256(0x00 || canonical(header))
    entry i   Hi = sha256(0x01 || H(i-1) || canonical(event))

The one-byte prefixes separate the two domains, so no event can be crafted to hash
like a genesis and the reverse. ``H(i-1)`` enters as its 32 raw bytes. Lines are
written in canonical form (sorted keys, no spaces, ASCII), and a verifier insists on
that form, so every changed byte shows, even one that would parse to the same value.
Lines and checkpoints are read by :mod:`governed_memory.audit.strict_json`, so a
refusal names what is wrong (a duplicate key and the object holding it, a ``NaN``)
rather than only that the bytes differ.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Final

import attrs

from governed_memory.audit.strict_json import (
    DuplicateKeyError,
    JsonDocumentError,
    read_canonical_json,
    read_json,
)
from governed_memory.audit.strict_json import (
    canonical_bytes as canonical_bytes,  # the chain's byte form, defined with its reader
)

FORMAT: Final = "governed-memory-audit/1"
GENESIS: Final = "genesis"
ENTRY: Final = "entry"
CONTINUE: Final = "continue"
KINDS: Final = (GENESIS, ENTRY, CONTINUE)
FILE_PATTERN: Final = "audit-*.jsonl"

_GENESIS_DOMAIN: Final = b"\x00"
_ENTRY_DOMAIN: Final = b"\x01"
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_ENTRY_HEAD: Final = b'{"event":'


class ChainFormatError(ValueError):
    """A line that is not a well-formed chain line (its reason is safe to show)."""


class ChainDocumentError(ChainFormatError, JsonDocumentError):
    """A chain line or head-only checkpoint that is not strict JSON (see
    :mod:`governed_memory.audit.strict_json`)."""


class ChainDuplicateKeyError(ChainDocumentError, DuplicateKeyError):
    """A chain line or head-only checkpoint with two equal keys in one object."""


def read_chain_json(data: bytes | str, document: str) -> Any:
    """:func:`read_json` raising this module's errors (``ChainFormatError``s)."""
    return read_json(data, document, error=ChainDocumentError,
                     duplicate=ChainDuplicateKeyError)


def genesis_hash(chain_id: str, created_at: float) -> str:
    header = {"chain_id": chain_id, "created_at": created_at, "format": FORMAT}
    return hashlib.sha256(_GENESIS_DOMAIN + canonical_bytes(header)).hexdigest()


def entry_hash(previous: str, event: Any) -> str:
    """``event`` as a JSON value, or already as its canonical bytes."""
    body = event if isinstance(event, bytes) else canonical_bytes(event)
    return hashlib.sha256(_ENTRY_DOMAIN + bytes.fromhex(previous) + body).hexdigest()


def _entry_tail(digest: str, previous: str, seq: int) -> bytes:
    # Sorted keys put "event" first and these after it, in this order.
    return (f',"hash":"{digest}","kind":"{ENTRY}","prev":"{previous}","seq":{seq}}}'
            ).encode("ascii")


def event_bytes(raw: bytes, value: dict[str, Any]) -> bytes:
    """The canonical bytes of a parsed entry's event, cut from its (canonical) line
    rather than serialized again: verification hashes exactly what was written."""
    tail = _entry_tail(value["hash"], value["prev"], value["seq"])
    if not (raw.startswith(_ENTRY_HEAD) and raw.endswith(tail)):
        raise ChainFormatError("entry fields are not in canonical order")
    return raw[len(_ENTRY_HEAD):len(raw) - len(tail)]


def file_name(index: int) -> str:
    return f"audit-{index:06d}.jsonl"


def genesis_line(chain_id: str, created_at: float) -> bytes:
    return canonical_bytes({"kind": GENESIS, "format": FORMAT, "chain_id": chain_id,
                            "created_at": created_at,
                            "hash": genesis_hash(chain_id, created_at)}) + b"\n"


def stated_genesis_line(chain_id: str, created_at: float, digest: str) -> bytes:
    """A genesis line stating ``digest`` as its hash, whatever the header hashes to: a
    trail kept in a database is written out (or verified) as it was stored, so an
    altered header or hash shows as the mismatch it is, instead of being recomputed
    into agreement."""
    return canonical_bytes({"kind": GENESIS, "format": FORMAT, "chain_id": chain_id,
                            "created_at": created_at, "hash": digest}) + b"\n"


def stated_entry_line(seq: int, previous: str, digest: str, event: bytes) -> bytes:
    """The line of an entry stored as its parts (the event's canonical bytes, the
    previous hash and its own), byte for byte what :func:`entry_line` wrote for an
    entry whose parts are intact; nothing is recomputed (see :func:`stated_genesis_line`)."""
    return _ENTRY_HEAD + event + _entry_tail(digest, previous, seq) + b"\n"


def continue_line(chain_id: str, seq: int, head: str, file_index: int) -> bytes:
    return canonical_bytes({"kind": CONTINUE, "format": FORMAT, "chain_id": chain_id,
                            "seq": seq, "head": head, "file_index": file_index}) + b"\n"


def entry_line(seq: int, previous: str, event: Any) -> tuple[bytes, str]:
    """The line for one entry and its hash (the event serialized once, for both)."""
    body = canonical_bytes(event)
    digest = entry_hash(previous, body)
    return _ENTRY_HEAD + body + _entry_tail(digest, previous, seq) + b"\n", digest


def parse_line(raw: bytes) -> dict[str, Any]:
    """One line (without its newline) as a mapping, refusing anything a writer of this
    format could not have produced."""
    value = read_canonical_json(raw, "", edited="not in canonical form (the line was edited)",
                                error=ChainDocumentError, duplicate=ChainDuplicateKeyError)
    if not isinstance(value, dict):
        raise ChainFormatError("not a JSON object")
    kind = value.get("kind")
    if kind not in KINDS:
        raise ChainFormatError(f"unknown line kind {kind!r}")
    if kind == ENTRY:
        _require(value, {"kind": str, "seq": int, "prev": str, "hash": str, "event": dict})
    elif kind == GENESIS:
        _require(value, {"kind": str, "format": str, "chain_id": str, "created_at": float,
                         "hash": str})
    else:
        _require(value, {"kind": str, "format": str, "chain_id": str, "seq": int,
                         "head": str, "file_index": int})
    if kind != ENTRY and value["format"] != FORMAT:
        raise ChainFormatError(f"unknown format {value['format']!r}")
    for name in ("prev", "hash", "head"):
        if name in value and not _is_digest(value[name]):
            raise ChainFormatError(f"{name} is not a SHA-256 hex digest")
    return value


def _require(value: dict[str, Any], fields: dict[str, type]) -> None:
    if set(value) != set(fields):
        raise ChainFormatError(f"{value['kind']} line has fields {sorted(value)}, "
                               f"expected {sorted(fields)}")
    for name, kind in fields.items():
        item = value[name]
        good = (isinstance(item, int | float) and not isinstance(item, bool)
                if kind is float else isinstance(item, kind) and not isinstance(item, bool))
        if not good:
            raise ChainFormatError(f"{name} must be a {kind.__name__}")


def _is_digest(value: str) -> bool:
    return _DIGEST.fullmatch(value) is not None


@attrs.frozen(slots=True)
class Checkpoint:
    """A chain's length and head at one moment. Kept apart from the trail (another
    system, a ticket, a signed mail), it lets a later verification prove the trail
    still holds every entry up to ``count``: truncation and rewriting both show."""

    chain_id: str
    count: int
    head: str
    created_at: float

    def to_json(self) -> str:
        return canonical_bytes({"format": FORMAT, "chain_id": self.chain_id,
                                "count": self.count, "head": self.head,
                                "created_at": self.created_at}).decode("ascii")

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "checkpoint") -> Checkpoint:
        """A checkpoint from its JSON (any layout: one kept in a ticket or a mail may
        have been reflowed), with exactly its fields of exactly their types: a
        ``"count": "40"`` or ``40.0`` is refused, not read as 40. ``source`` names it
        in a refusal."""
        value = read_chain_json(text, source)
        if not isinstance(value, dict) or value.get("format") != FORMAT:
            raise ChainFormatError(f"{source}: not a governed-memory audit checkpoint")
        fields = {"format", "chain_id", "count", "head", "created_at"}
        if set(value) != fields:
            raise ChainFormatError(f"{source}: checkpoint has fields {sorted(value)}, "
                                   f"expected {sorted(fields)}")
        chain_id, count, head, created_at = (value["chain_id"], value["count"],
                                             value["head"], value["created_at"])
        if not (isinstance(chain_id, str) and chain_id
                and isinstance(count, int) and not isinstance(count, bool) and count >= 0
                and isinstance(head, str) and _is_digest(head)
                and isinstance(created_at, int | float) and not isinstance(created_at, bool)
                and math.isfinite(created_at)):
            raise ChainFormatError(f"{source}: checkpoint needs a chain_id (text), a count "
                                   "(a whole number from 0), a head (a SHA-256 hex digest) "
                                   "and a created_at (epoch seconds)")
        return cls(chain_id, count, head, float(created_at))
