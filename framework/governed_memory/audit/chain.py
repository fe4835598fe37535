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
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Final

import attrs

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


def canonical_bytes(value: Any) -> bytes:
    """The one byte form of a JSON value that hashes and files use."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


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
    try:
        value = json.loads(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ChainFormatError("not a JSON line") from None
    if not isinstance(value, dict):
        raise ChainFormatError("not a JSON object")
    try:
        canonical = canonical_bytes(value)
    except ValueError:
        raise ChainFormatError("holds a value JSON cannot represent") from None
    if canonical != raw:
        raise ChainFormatError("not in canonical form (the line was edited)")
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
    def from_json(cls, text: str) -> Checkpoint:
        try:
            value = json.loads(text)
        except ValueError:
            raise ChainFormatError("checkpoint is not JSON") from None
        if not isinstance(value, dict) or value.get("format") != FORMAT:
            raise ChainFormatError("not a governed-memory audit checkpoint")
        try:
            checkpoint = cls(str(value["chain_id"]), int(value["count"]), str(value["head"]),
                             float(value["created_at"]))
        except (KeyError, TypeError, ValueError):
            raise ChainFormatError("checkpoint lacks chain_id, count, head or created_at"
                                   ) from None
        if checkpoint.count < 0 or not _is_digest(checkpoint.head):
            raise ChainFormatError("checkpoint count or head is malformed")
        return checkpoint
