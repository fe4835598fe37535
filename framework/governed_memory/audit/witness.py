"""A witness: a second party that countersigns a log's checkpoint only after checking
that it extends the last one it countersigned (C2SP ``tlog-cosignature``).

A log operator can show one auditor one history and another a different one (a split
view); each view verifies on its own. A witness keeps, per log (origin), the largest
tree it has cosigned, and cosigns a new checkpoint only if

- the log's own signature on it verifies (the log's verifier key is pinned on first
  sight: a later checkpoint signed by another key is refused);
- it is not smaller than that tree (no rollback), states the same root at the same size
  (no fork), and a consistency proof from that tree to it verifies (no rewrite). The
  proof is computed from the log's tiles (``audit tiles``): a handful of tiles, never
  the trail, and nothing read from them is trusted but through the proof's check.

Its state is a small canonical JSON file, replaced atomically under a lock, and written
before the cosignature is handed out, so the witness never signs a tree it has not
recorded. An auditor then requires k cosignatures of n witnesses it trusts
(:func:`witness_policy`): unless k witnesses collude with the operator, every auditor
holding a checkpoint so cosigned sees one history.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from governed_memory.audit.checkpoint_notes import LogCheckpoint
from governed_memory.audit.notes import (
    Note,
    NoteFormatError,
    Verified,
    VerifierKey,
    check_key_name,
    cosign,
    require_quorum,
)
from governed_memory.audit.proof_errors import (
    KeyMismatchError,
    RootMismatchError,
    TreeSizeError,
)
from governed_memory.audit.strict_json import JsonDocumentError, canonical_bytes, read_json
from governed_memory.audit.tiles import TileDirectory, TiledTree
from governed_memory.audit.tree_hashing import check_consistency

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from governed_memory.audit.proof_documents import TreeCheckpoint

STATE_FORMAT: Final = "governed-memory-witness-state/1"


class WitnessStateError(ValueError):
    """The witness's state file cannot be used (damaged, or another witness's)."""


@attrs.frozen(slots=True)
class Witnessed:
    """What a witness last cosigned for one log."""

    log_key: str
    size: int
    root: bytes
    time: int


@attrs.frozen(slots=True)
class Cosigned:
    note: Note
    origin: str
    size: int
    previous_size: int | None
    """The tree cosigned before for this log (``None``: the first checkpoint seen)."""
    proof_length: int
    time: int


def cosign_checkpoint(data: bytes, tiles: TileDirectory, *, log_key: VerifierKey,
                      key: Ed25519PrivateKey, name: str, state: str | os.PathLike[str],
                      now: int) -> Cosigned:
    """Check the checkpoint note ``data`` as a witness and cosign it at time ``now``."""
    check_key_name(name, "the witness's name")
    if log_key.cosigner:
        raise NoteFormatError("the log's key is a plain Ed25519 verifier key (type 0x01)")
    note = Note.parse(data)
    body = LogCheckpoint.parse(note.text)
    note.verify([log_key])
    me = VerifierKey.of(name, key, cosigner=True).text()
    path = Path(state)
    with _locked(path):
        logs = _read_state(path, me)
        last = logs.get(body.origin)
        proof_length = 0
        if last is not None:
            if last.log_key != log_key.text():
                raise KeyMismatchError(f"log {body.origin} was witnessed signed by "
                                       f"{last.log_key}, not by {log_key.text()}")
            proof_length = _check_extends(tiles, last, body)
        logs[body.origin] = Witnessed(log_key.text(), body.size, body.root, now)
        _write_state(path, me, logs)
    signed = note.with_signature(cosign(note.text, key, name, now))
    return Cosigned(signed, body.origin, body.size, None if last is None else last.size,
                    proof_length, now)


def _check_extends(tiles: TileDirectory, last: Witnessed, body: LogCheckpoint) -> int:
    if body.size < last.size:
        raise TreeSizeError(f"the checkpoint's {body.size} entries are fewer than the "
                            f"{last.size} this witness cosigned for {body.origin} (a "
                            "rollback)")
    if body.size == last.size:
        if body.root != last.root:
            raise RootMismatchError(f"{body.origin} at {body.size} entries has another root "
                                    "than the one this witness cosigned (a fork)")
        return 0
    path = TiledTree(tiles, body.size).consistency_path(last.size)
    check_consistency(last.size, body.size, last.root, body.root, path)
    return len(path)


@contextlib.contextmanager
def _locked(state: Path) -> Iterator[None]:
    fd = os.open(state.with_name(state.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_state(path: Path, me: str) -> dict[str, Witnessed]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise WitnessStateError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        value = read_json(data, str(path))
        if value.get("format") != STATE_FORMAT or value.get("witness") != me:
            raise WitnessStateError(f"{path}: not the state of witness {me.split('+')[0]} "
                                    "with this key")
        return {origin: _witnessed(entry) for origin, entry in value["logs"].items()}
    except (JsonDocumentError, AttributeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, WitnessStateError):
            raise
        raise WitnessStateError(f"{path}: not a witness state file ({exc})") from None


def _witnessed(entry: dict[str, Any]) -> Witnessed:
    root = base64.b64decode(entry["root"], validate=True)
    size, time = entry["size"], entry["time"]
    if (len(root) != 32 or not isinstance(size, int) or not isinstance(time, int)
            or isinstance(size, bool) or size < 0):
        raise ValueError("a log's entry holds a log key, a size, a root and a time")
    return Witnessed(str(entry["log_key"]), size, root, time)


def _write_state(path: Path, me: str, logs: dict[str, Witnessed]) -> None:
    body = {"format": STATE_FORMAT, "witness": me,
            "logs": {origin: {"log_key": w.log_key, "size": w.size, "time": w.time,
                              "root": base64.b64encode(w.root).decode("ascii")}
                     for origin, w in logs.items()}}
    temporary = path.with_name(path.name + ".new")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(canonical_bytes(body) + b"\n")
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def witness_policy(data: bytes, checkpoint: TreeCheckpoint, witnesses: Sequence[VerifierKey],
                   quorum: int) -> list[Verified]:
    """Refuse unless the checkpoint note ``data`` states ``checkpoint``'s tree and holds
    valid cosignatures by at least ``quorum`` distinct ``witnesses``."""
    note = Note.parse(data)
    LogCheckpoint.parse(note.text).matches(checkpoint)
    return require_quorum(note, witnesses, quorum)
