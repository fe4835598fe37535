"""``governed-memory audit``: verify, query, report on, checkpoint and prove a trail.

Exit codes, so a script can tell an alarm from a wrong argument:

- 0 the trail verifies (and, for ``query``/``report``, was read); the proof or
  signature holds; the proof was written;
- 1 ``BROKEN``: the trail does not verify, or no longer matches the checkpoint
  (tampering or damage; the first broken entry and why go to stderr);
- 2 bad arguments (including a file that is no checkpoint or proof at all, a document
  that is not JSON, and a key file that cannot be used, that others may read or that
  holds more than one key);
- 3 not a hash-chained trail (a plain JSON lines event log, say);
- 4 no trail here (a directory without ``audit-*.jsonl`` files);
- 5 ``REFUSED``: a checkpoint or proof does not hold (unsigned where a key was given,
  signed by another key, a bad signature, altered, of another trail, a wrong leaf or
  path); also an event, proof or checkpoint that is JSON no honest writer produced (a
  duplicate key at any depth, ``NaN``, a byte order mark, a number spelled otherwise
  than the canonical form spells it, data after the value), told as one line
  ``error (<code>): <file>: <why>`` (see :mod:`governed_memory.audit.strict_json`);
- 6 the event is not within the checkpoint's tree (not in the trail, or appended
  after the checkpoint was taken);
- 7, 8, 9 as every command: a trail store (``--store``) that cannot be used (its
  plugin or extra missing), that failed a read, or could not be reached, told as one
  line ``error (<code>): ...``.

A trail line with such JSON is damage like any other edit: ``BROKEN`` (1), naming the
line and the duplicate key.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, NoReturn

import click

from governed_memory.audit.chain import FORMAT, ChainFormatError, Checkpoint
from governed_memory.audit.proofs import (
    CHECKPOINT_FORMAT,
    ConsistencyProof,
    InclusionProof,
    KeyFileError,
    ProofError,
    ProofFormatError,
    TreeCheckpoint,
    load_document,
    load_event,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit.query import EventFilter, TrailEntry, query
from governed_memory.audit.report import CATEGORIES, SubjectReport, subject_report
from governed_memory.audit.stored import StoredTrail, TrailStore
from governed_memory.audit.strict_json import INVALID_JSON, JsonDocumentError, read_json
from governed_memory.audit.summary import PrincipalActivity, principal_summary
from governed_memory.audit.times import iso, parse_time
from governed_memory.audit.verify import (
    BROKEN,
    NO_TRAIL,
    NOT_A_TRAIL,
    AnyCheckpoint,
    Problem,
    Source,
    TrailProblemError,
    Verification,
    verify_trail,
)
from governed_memory.cli.exit_codes import exit_code
from governed_memory.converter import unstructure
from governed_memory.errors import GovernedMemoryError
from governed_memory.events import subject_hash

STORE_SINKS: Final = {"postgresql": "postgres-trail", "postgres": "postgres-trail"}
"""The event sink (registered by a plugin: the native one) that reads a trail store,
by the scheme of its connection string."""


class _TrailParam(click.ParamType):  # type: ignore[type-arg]
    """A trail directory or file (which must exist), or a trail store's connection
    string (``postgresql://...``), kept as the string."""

    name = "trail"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path | str:
        if isinstance(value, str) and value.split("://", 1)[0] in STORE_SINKS and "://" in value:
            return value
        converted: Path = click.Path(exists=True, path_type=Path).convert(value, param, ctx)
        return converted


TRAIL = click.argument("trail", nargs=-1, required=False, type=_TrailParam())
TrailArgs = tuple[Path | str, ...]
A_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _store_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--store DSN`` and ``--schema S``: read the trail straight from PostgreSQL."""
    command = click.option("--schema", default=None, metavar="SCHEMA",
                           help="the trail store's schema (default governed_memory)")(command)
    return click.option("--store", default=None, metavar="DSN",
                        help="read the trail from this PostgreSQL store (a postgresql:// "
                             "connection string) instead of files")(command)

EXIT_CODES = {BROKEN: 1, NOT_A_TRAIL: 3, NO_TRAIL: 4}
"""Exit code by ``Problem.kind`` (0: verified; 2: bad arguments, click's own)."""
EXIT_USAGE: Final = 2
EXIT_REFUSED: Final = 5
EXIT_NOT_WITHIN: Final = 6
PROGRESS_FROM_BYTES: Final = 64 * 1024 * 1024
"""A trail this large takes seconds to read: show a bar (on a terminal only)."""


@click.group()
def audit() -> None:
    """Verify, query and report on a hash-chained audit trail (the ``audit`` sink).

    TRAIL is the sink's directory or its ``audit-*.jsonl`` files in order, or a
    trail kept in PostgreSQL (the ``postgres-trail`` sink's): a postgresql://
    connection string, or --store DSN (with --schema S).

    \b
    Exit codes: 0 ok; 1 BROKEN (the trail does not verify or no longer
    matches the checkpoint); 2 bad arguments; 3 not a hash-chained trail;
    4 no trail here; 5 REFUSED (a checkpoint or proof does not hold:
    unsigned, another key, bad signature, altered, another trail, wrong
    leaf or path; or an event, proof or checkpoint with a duplicate key,
    NaN or other JSON no writer of it produces: error (duplicate_key) ...);
    6 the event is not within the checkpoint's tree; 9 the trail store could not
    be reached (error (unavailable) ...).
    """


@contextlib.contextmanager
def _sources(trail: TrailArgs, store: str | None, schema: str | None
             ) -> Iterator[tuple[Source, ...]]:
    """The trail to read: files and directories as given, or one trail store (a
    ``postgresql://`` TRAIL or ``--store``) opened through the event sink its plugin
    registered, and closed afterwards. A store that cannot be read ends the command
    with ``error (<code>): ...`` and the CLI's exit code for it (9: unavailable)."""
    stores = [item for item in trail if isinstance(item, str)] + ([store] if store else [])
    if not trail and not stores:
        raise click.UsageError("give TRAIL (the trail's directory or files, or a "
                               "postgresql:// store), or --store DSN")
    if not stores:
        if schema is not None:
            raise click.UsageError("--schema names a trail store's schema: give --store too")
        yield tuple(item for item in trail if isinstance(item, Path))
        return
    if len(stores) > 1 or len(trail) + (1 if store else 0) > 1:
        raise click.UsageError("a trail store is read on its own: give one postgresql:// "
                               "trail (as TRAIL or --store) and no files")
    try:
        opened = _open_store(stores[0], schema)
        try:
            yield (opened,)
        finally:
            opened.close()
    except GovernedMemoryError as exc:
        click.echo(f"error ({exc.code}): {exc}", err=True)
        raise SystemExit(exit_code(exc.code)) from None


def _open_store(dsn: str, schema: str | None) -> StoredTrail:
    from governed_memory.errors import MemoryConfigurationError
    from governed_memory.plugins import PluginManager

    scheme = dsn.split("://", 1)[0]
    if scheme not in STORE_SINKS or "://" not in dsn:
        raise click.BadParameter(f"a trail store is a connection string starting "
                                 f"{' or '.join(s + '://' for s in STORE_SINKS)}",
                                 param_hint="--store")
    name = STORE_SINKS[scheme]
    config: dict[str, Any] = {"dsn": dsn}
    if schema is not None:
        config["schema"] = schema
    sink = PluginManager.load().sinks.get(name).factory(config)
    if not isinstance(sink, TrailStore):
        raise MemoryConfigurationError(f"event sink {name!r} cannot be read as a trail store")
    return sink.stored_trail()


def _stored(sources: tuple[Source, ...]) -> StoredTrail | None:
    return sources[0] if len(sources) == 1 and isinstance(sources[0], StoredTrail) else None


def _checkpoints(paths: tuple[Path, ...]) -> list[tuple[str, AnyCheckpoint]]:
    """Every checkpoint in the files (one JSON per line), with where it was found: the
    sink's head-only ones and ``audit checkpoint``'s Merkle ones alike."""
    found: list[tuple[str, AnyCheckpoint]] = []
    for path in paths:
        for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            found.append((where, _checkpoint_line(line.removesuffix(b"\r"), where)))
    return found


def _checkpoint_line(line: bytes, where: str) -> AnyCheckpoint:
    try:
        value = read_json(line, where)
    except JsonDocumentError as exc:
        _bad_document(exc)
    kind = value.get("format") if isinstance(value, dict) else None
    if kind == CHECKPOINT_FORMAT:
        try:
            return TreeCheckpoint.from_json(line, source=where)
        except ProofError as exc:
            _refuse(f"{where}: {exc}")
    try:
        return Checkpoint.from_json(line, source=where)
    except ChainFormatError as exc:
        raise click.BadParameter(str(exc), param_hint="--checkpoint") from None


def _bad_document(exc: JsonDocumentError) -> NoReturn:
    """A document that is not strict JSON: one line, ``error (<code>): <file>: <why>``;
    exit 2 if it is not JSON at all (no such document was given), else 5 (REFUSED: JSON
    that no writer of it produces, such as a duplicate key, is what an edit leaves)."""
    click.echo(f"error ({exc.code}): {exc}", err=True)
    raise SystemExit(EXIT_USAGE if exc.code == INVALID_JSON else EXIT_REFUSED)


def _tree_checkpoint(path: Path, option: str = "--checkpoint") -> TreeCheckpoint:
    """The one Merkle checkpoint a file holds (what ``audit checkpoint`` wrote)."""
    found = _checkpoints((path,))
    if len(found) != 1:
        raise click.BadParameter(f"{path}: holds {len(found)} checkpoints, give a file of "
                                 "one", param_hint=option)
    where, checkpoint = found[0]
    if not isinstance(checkpoint, TreeCheckpoint):
        raise click.BadParameter(f"{where}: a head-only checkpoint (format {FORMAT}) has no "
                                 "Merkle root to prove against: take one with `audit "
                                 "checkpoint`", param_hint=option)
    return checkpoint


def _refuse(message: str) -> NoReturn:
    click.echo(f"REFUSED {message}", err=True)
    raise SystemExit(EXIT_REFUSED)


def _now() -> float:
    """Now, for times ago (``--since 1h``); a test stands a fixed clock in."""
    return time.time()


def _public_key(path: Path | None) -> Any:
    if path is None:
        return None
    from governed_memory.audit.signing import load_public_key_file

    try:
        return load_public_key_file(path)
    except KeyFileError as exc:
        raise click.BadParameter(str(exc), param_hint="--public-key") from None


def _signed_by(key: Any, checkpoints: list[tuple[str, AnyCheckpoint]]) -> None:
    """Refuse (exit 5) unless every checkpoint is signed by ``key``."""
    for where, checkpoint in checkpoints:
        if not isinstance(checkpoint, TreeCheckpoint):
            _refuse(f"{where}: a head-only checkpoint carries no signature, and one by the "
                    "given key is required")
        try:
            checkpoint.verify_signature(key)
        except ProofError as exc:
            _refuse(f"{where}: {exc}")


@contextlib.contextmanager
def _progress(trail: tuple[Source, ...], label: str
              ) -> Iterator[Callable[[int], None] | None]:
    """A progress bar on stderr over the bytes of ``trail``, when it is large and stderr
    a terminal (a pipe or a test gets the output alone)."""
    from governed_memory.audit.proving import trail_bytes

    total = trail_bytes(trail)
    if total < PROGRESS_FROM_BYTES or not _interactive():
        yield None
        return
    with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
        yield bar.update


def _interactive() -> bool:
    return sys.stderr.isatty()


def _say(problem: Problem) -> None:
    """Only damage is called BROKEN; the other kinds say what they are themselves."""
    prefix = "BROKEN " if problem.kind == BROKEN else ""
    click.echo(f"{prefix}{problem}", err=True)


def _verified(trail: tuple[Source, ...], checkpoints: list[AnyCheckpoint]) -> Verification:
    verification = verify_trail(trail, checkpoints)
    if verification.problem is not None:
        _say(verification.problem)
    return verification


def _exit_for(problem: Problem) -> NoReturn:
    raise SystemExit(EXIT_CODES.get(problem.kind, 1))


@audit.command()
@TRAIL
@_store_options
@click.option("--checkpoint", "checkpoint_files", multiple=True, type=A_FILE,
              help="a file of exported checkpoints (one JSON per line) to check against")
@click.option("--public-key", type=A_FILE, default=None,
              help="a PEM Ed25519 public key: every checkpoint must be signed by it "
                   "(without TRAIL, only the signatures are checked)")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def verify(trail: TrailArgs, store: str | None, schema: str | None,
           checkpoint_files: tuple[Path, ...], public_key: Path | None,
           as_json: bool) -> None:
    """Prove every entry, link, file boundary and checkpoint; report the first break.
    With --public-key, refuse (exit 5) a checkpoint that is unsigned, signed by another
    key, or altered since it was signed. A trail store (--store, or a postgresql://
    TRAIL) is read straight from the database, its stored Merkle leaves and head record
    checked too."""
    if not trail and store is None and not (checkpoint_files and public_key):
        raise click.UsageError("give TRAIL (or --store), or --checkpoint with --public-key "
                               "to check signatures alone")
    found = _checkpoints(checkpoint_files)
    key = _public_key(public_key)
    if key is not None:
        _signed_by(key, found)
        if not trail and store is None:
            _say_signed(found, as_json)
            return
    checkpoints = [checkpoint for _, checkpoint in found]
    with _sources(trail, store, schema) as sources:
        with _progress(sources, "verifying") as progress:
            verification = verify_trail(sources, checkpoints, progress=progress)
        stored = _stored(sources)
        waiting = stored.waiting() if stored is not None else None
    if as_json:
        body = unstructure(verification)
        body["ok"] = verification.ok
        body["status"] = verification.status
        body["signatures_checked"] = len(found) if key is not None else 0
        if waiting is not None:
            body["waiting"] = waiting
        click.echo(json.dumps(body, indent=2, sort_keys=True))
    elif verification.ok:
        start = (f" after entry {verification.first_seq} (earlier files not given)"
                 if verification.first_seq else "")
        signed = f", {len(found)} signed by the key" if key is not None else ""
        where = (verification.files[0] if stored is not None
                 else f"{len(verification.files)} file(s)")
        queued = (f", {waiting} event(s) waiting for a position" if waiting else "")
        click.echo(f"OK chain {verification.chain_id}: {verification.entries} entries"
                   f"{start} in {where}, head {verification.head}, "
                   f"{verification.checkpoints_checked} checkpoint(s) matched{signed}{queued}")
    else:
        assert verification.problem is not None
        _say(verification.problem)
    if verification.problem is not None:
        _exit_for(verification.problem)


def _say_signed(found: list[tuple[str, AnyCheckpoint]], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"ok": True, "status": "ok", "signatures_checked": len(found),
                               "checkpoints": [unstructure(c) for _, c in found]},
                              indent=2, sort_keys=True))
        return
    for where, checkpoint in found:
        assert isinstance(checkpoint, TreeCheckpoint)
        click.echo(f"OK {where}: chain {checkpoint.chain_id}, {checkpoint.tree_size} "
                   f"entries, root {checkpoint.root}, signed by {checkpoint.key_id}")


@audit.command()
@TRAIL
@_store_options
@click.option("--sign", "key_file", type=A_FILE, default=None, metavar="KEYFILE",
              help="sign it with this Ed25519 private key (PEM PKCS 8, unencrypted, "
                   "mode 600)")
def checkpoint(trail: TrailArgs, store: str | None, schema: str | None,
               key_file: Path | None) -> None:
    """Print a checkpoint of a trail that verifies (entry count, Merkle root and chain
    head, optionally signed), to keep apart from the trail and pass to ``audit verify
    --checkpoint``, ``audit prove`` and ``audit consistency`` later."""
    from governed_memory.audit.verify import tree_checkpoint_of

    key = None
    if key_file is not None:  # before the long walk: a bad key fails at once
        from governed_memory.audit.signing import load_private_key

        try:
            key = load_private_key(key_file)
        except KeyFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--sign") from None
    try:
        with _sources(trail, store, schema) as sources, \
                _progress(sources, "checkpointing") as progress:
            found = tree_checkpoint_of(sources, time.time(), progress=progress)
    except TrailProblemError as exc:
        _say(exc.problem)
        _exit_for(exc.problem)
    if key is not None:
        from governed_memory.audit.signing import sign_checkpoint

        found = sign_checkpoint(found, key)
    click.echo(found.to_json())


@audit.command()
@TRAIL
@_store_options
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="the directory to write the audit-*.jsonl files to (new or empty)")
@click.option("--max-file-bytes", type=click.IntRange(min=4096), default=None,
              help="rotate to the next file past this size (the sink's default, 64 MiB)")
def export(trail: TrailArgs, store: str | None, schema: str | None, out: Path,
           max_file_bytes: int | None) -> None:
    """Write a trail kept in PostgreSQL (--store, or a postgresql:// TRAIL) as the
    audit-*.jsonl files the audit sink writes, row for row as stored: `audit verify`,
    `prove` and `verify-proof` take them like any trail. Events still waiting for a
    position are not in it (stderr says how many)."""
    from governed_memory.audit.export import ExportError, export_trail
    from governed_memory.audit.sink import DEFAULT_MAX_FILE_BYTES

    with _sources(trail, store, schema) as sources:
        stored = _stored(sources)
        if stored is None:
            raise click.UsageError("export reads a trail store: give --store DSN or a "
                                   "postgresql:// TRAIL (a trail of files is its own export)")
        if stored.opening() is None:
            click.echo(f"{stored.location}: no trail here: the store holds no audit trail",
                       err=True)
            raise SystemExit(EXIT_CODES[NO_TRAIL])
        try:
            exported = export_trail(stored, out,
                                    max_file_bytes=max_file_bytes or DEFAULT_MAX_FILE_BYTES)
        except ExportError as exc:
            raise click.BadParameter(str(exc), param_hint="--out") from None
        waiting = stored.waiting()
    click.echo(f"exported chain {exported.chain_id}: {exported.entries} entries in "
               f"{len(exported.files)} file(s) to {out}, head {exported.head}")
    if waiting:
        click.echo(f"{waiting} event(s) wait for a position and are not in this export",
                   err=True)


@audit.command()
@click.argument("private_key", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("public_key", type=click.Path(dir_okay=False, path_type=Path))
def keygen(private_key: Path, public_key: Path) -> None:
    """Make an Ed25519 key pair for signing checkpoints: PRIVATE_KEY (PEM PKCS 8, mode
    600) and PUBLIC_KEY (PEM) to hand to auditors. Prints the key id, never the key;
    refuses to overwrite a file."""
    from governed_memory.audit.signing import generate_key_pair

    try:
        kid = generate_key_pair(private_key, public_key)
    except KeyFileError as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(f"key id {kid}")
    click.echo(f"private key {private_key} (keep it where the trail's writers cannot "
               f"reach), public key {public_key}", err=True)


def _trail_failure(exc: Exception) -> NoReturn:
    """The exit for what proving over a trail ran into."""
    from governed_memory.audit.proving import EventNotInTreeError

    if isinstance(exc, TrailProblemError):
        _say(exc.problem)
        _exit_for(exc.problem)
    if isinstance(exc, EventNotInTreeError):
        click.echo(str(exc), err=True)
        raise SystemExit(EXIT_NOT_WITHIN)
    _refuse(str(exc))


@audit.command()
@click.argument("event_id")
@TRAIL
@_store_options
@click.option("--checkpoint", "checkpoint_file", type=A_FILE, required=True,
              help="the Merkle checkpoint to prove against (`audit checkpoint`'s output)")
@click.option("--public-key", type=A_FILE, default=None,
              help="refuse (exit 5) unless the checkpoint is signed by this key")
@click.option("--event-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the event's JSON here, to hand over with the proof")
def prove(event_id: str, trail: TrailArgs, store: str | None, schema: str | None,
          checkpoint_file: Path, public_key: Path | None, event_out: Path | None) -> None:
    """Print an inclusion proof (JSON) that event EVENT_ID was in the trail when the
    checkpoint was taken; `audit verify-proof` or governed_memory.audit.proofs checks
    it with the event and the checkpoint alone. Exit 6 if the event is not within the
    checkpoint."""
    from governed_memory.audit.proving import EventNotInTreeError, prove_inclusion

    cp = _tree_checkpoint(checkpoint_file)
    key = _public_key(public_key)
    if key is not None:
        _signed_by(key, [(str(checkpoint_file), cp)])
    try:
        with _sources(trail, store, schema) as sources, \
                _progress(sources, "proving") as progress:
            proof, event = prove_inclusion(sources, event_id, cp, progress=progress)
    except (TrailProblemError, EventNotInTreeError, ProofError) as exc:
        _trail_failure(exc)
    if event_out is not None:
        event_out.write_bytes(event + b"\n")
    click.echo(proof.to_json())
    click.echo(f"event {event_id} is entry {proof.seq} of {proof.tree_size} "
               f"({len(proof.audit_path)} hashes)", err=True)


@audit.command()
@click.argument("first", type=A_FILE)
@click.argument("second", type=A_FILE)
@TRAIL
@_store_options
@click.option("--public-key", type=A_FILE, default=None,
              help="refuse (exit 5) unless both checkpoints are signed by this key")
def consistency(first: Path, second: Path, trail: TrailArgs, store: str | None,
                schema: str | None, public_key: Path | None) -> None:
    """Print a consistency proof (JSON) that checkpoint SECOND's tree extends FIRST's:
    nothing FIRST covers was changed or removed by the time SECOND was taken."""
    from governed_memory.audit.proofs import TreeSizeError
    from governed_memory.audit.proving import prove_consistency

    older, newer = _tree_checkpoint(first, "FIRST"), _tree_checkpoint(second, "SECOND")
    key = _public_key(public_key)
    if key is not None:
        _signed_by(key, [(str(first), older), (str(second), newer)])
    if older.tree_size > newer.tree_size:
        raise click.BadParameter(f"FIRST covers {older.tree_size} entries, SECOND "
                                 f"{newer.tree_size}: give the older checkpoint first")
    try:
        with _sources(trail, store, schema) as sources, \
                _progress(sources, "proving") as progress:
            proof = prove_consistency(sources, older, newer, progress=progress)
    except TreeSizeError as exc:
        raise click.BadParameter(str(exc)) from None
    except (TrailProblemError, ProofError) as exc:
        _trail_failure(exc)
    click.echo(proof.to_json())


@audit.command("verify-proof")
@click.argument("proof_file", metavar="PROOF", type=A_FILE)
@click.option("--checkpoint", "checkpoint_file", type=A_FILE, required=True,
              help="the checkpoint the proof is against (for a consistency proof, the "
                   "later one)")
@click.option("--event", "event_file", type=A_FILE, default=None,
              help="the event's JSON (inclusion proofs)")
@click.option("--earlier", "earlier_file", type=A_FILE, default=None,
              help="the earlier checkpoint (consistency proofs)")
@click.option("--public-key", type=A_FILE, default=None,
              help="refuse (exit 5) unless the checkpoint(s) are signed by this key")
def verify_proof(proof_file: Path, checkpoint_file: Path, event_file: Path | None,
                 earlier_file: Path | None, public_key: Path | None) -> None:
    """Check an inclusion or consistency proof with nothing but it, the checkpoint(s)
    and the event: no trail needed. Exit 5 (REFUSED) and why, if it does not hold."""
    try:
        document = load_document(proof_file.read_bytes(), source=str(proof_file))
    except JsonDocumentError as exc:
        _bad_document(exc)
    except ProofFormatError as exc:
        if "unknown format" in str(exc):
            raise click.BadParameter(str(exc), param_hint="PROOF") from None
        _refuse(f"{proof_file}: {exc}")
    later = _tree_checkpoint(checkpoint_file)
    key = _public_key(public_key)
    try:
        if isinstance(document, InclusionProof):
            if event_file is None:
                raise click.UsageError("an inclusion proof is checked with the event: "
                                       "give --event")
            try:
                event = load_event(event_file.read_bytes(), source=str(event_file))
            except JsonDocumentError as exc:
                _bad_document(exc)
            verify_inclusion(event, document, later, public_key=key)
            click.echo(f"OK event {document.event_id} is entry {document.seq} of chain "
                       f"{later.chain_id} at {later.tree_size} entries (root {later.root})"
                       + (f", signed by {later.key_id}" if key is not None else ""))
        elif isinstance(document, ConsistencyProof):
            if earlier_file is None:
                raise click.UsageError("a consistency proof is checked against two "
                                       "checkpoints: give --earlier")
            earlier = _tree_checkpoint(earlier_file, "--earlier")
            verify_consistency(earlier, later, document, public_key=key)
            click.echo(f"OK chain {later.chain_id} at {later.tree_size} entries extends "
                       f"itself at {earlier.tree_size} entries"
                       + (f", both signed by {later.key_id}" if key is not None else ""))
        else:
            raise click.BadParameter(f"{proof_file}: a checkpoint, not a proof",
                                     param_hint="PROOF")
    except ProofError as exc:
        _refuse(str(exc))


def _time(_: click.Context, __: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_time(value, _now())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


TIME_HELP = ("epoch seconds, ISO 8601 (UTC without an offset), or a time ago: 90s, 30m, "
             "1h, 2d, 1w, '1 hour ago'")


@audit.command("query")
@TRAIL
@_store_options
@click.option("--tenant", default=None)
@click.option("--principal", default=None, help="principal id, exactly")
@click.option("--scope-hash", default=None, help="an sh1:… scope hash")
@click.option("--subject", "subject", nargs=2, default=None, metavar="TENANT USER",
              help="events about one data subject (matched by its subject hash)")
@click.option("--operation", default=None,
              help="an operation (add, search, delete_user, …) or an event type")
@click.option("--outcome", default=None, help="committed, completed, deny, rejected, …")
@click.option("--since", default=None, callback=_time, metavar="TIME",
              help=f"from this time on: {TIME_HELP}")
@click.option("--until", default=None, callback=_time, metavar="TIME",
              help=f"before this time: {TIME_HELP}")
@click.option("--summary", type=click.Choice(["principal"]), default=None,
              help="instead of the events, one row per principal: its operations by "
                   "operation and outcome, how many allowed, denied, rejected, failed")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="at most this many events (with --summary: rows)")
@click.option("--no-verify", is_flag=True, help="read without verifying the chain first")
@click.option("--json", "as_json", is_flag=True,
              help="one JSON event per line (with --summary: one JSON document)")
def query_(trail: TrailArgs, store: str | None, schema: str | None,
           tenant: str | None, principal: str | None,
           scope_hash: str | None, subject: tuple[str, str] | None, operation: str | None,
           outcome: str | None, since: float | None, until: float | None,
           summary: str | None, limit: int | None, no_verify: bool, as_json: bool) -> None:
    """Events matching every filter given, in chain order. The text form shows each
    event's decision, policy revision and reasons too (``--json`` has every field).
    ``--summary principal`` sums the matching events up per principal instead: who
    touched this tenant, subject or scope, how often, allowed or denied."""
    where = EventFilter(tenant=tenant, principal=principal, scope_hash=scope_hash,
                        subject_hash=subject_hash(*subject) if subject else None,
                        operation=operation, outcome=outcome, since=since, until=until)
    with _sources(trail, store, schema) as sources:
        _verify_unless(no_verify, sources)
        if summary is not None:
            _print_summary(principal_summary(query(sources, where)), limit, as_json)
            return
        shown = _print_events(query(sources, where), limit, as_json)
    if not as_json:
        click.echo(f"{shown} event(s)", err=True)


def _print_events(entries: Iterator[TrailEntry], limit: int | None, as_json: bool) -> int:
    shown = 0
    for entry in entries:
        if limit is not None and shown >= limit:
            break
        shown += 1
        event = entry.event
        if as_json:
            click.echo(json.dumps({"seq": entry.seq, "event": event}, sort_keys=True))
            continue
        click.echo(_query_line(entry.seq, entry.occurred_at, event))
    return shown


SUMMARY_COLUMNS: Final = ("principal", "tenant", "operations", "allowed", "denied",
                          "rejected", "failed", "last seen", "by operation and outcome")


def _print_summary(rows: tuple[PrincipalActivity, ...], limit: int | None,
                   as_json: bool) -> None:
    """The per-principal summary: a table (a header, then a row per principal, counts
    right-aligned) or one JSON document; totals go to stderr with the text form."""
    shown = rows[:limit] if limit is not None else rows
    if as_json:
        click.echo(json.dumps({
            "summary": "principal", "principals": [unstructure(row) for row in shown],
            "operations": sum(row.operations for row in rows),
            "events": sum(row.events for row in rows)}, indent=2, sort_keys=True))
        return
    table = [list(SUMMARY_COLUMNS)] + [[
        row.principal_id, ",".join(row.tenant_ids) or "-", str(row.operations),
        str(row.allowed), str(row.denied), str(row.rejected), str(row.failed),
        iso(row.last_at),
        " ".join(f"{operation}:{outcome}={count}"
                 for operation, outcomes in row.by_operation.items()
                 for outcome, count in outcomes.items()) or "-"] for row in shown]
    widths = [max(len(line[column]) for line in table) for column in range(len(table[0]))]
    for line in table:
        cells = [cell.rjust(width) if 2 <= column <= 6 else cell.ljust(width)
                 for column, (cell, width) in enumerate(zip(line, widths, strict=True))]
        click.echo("  ".join(cells).rstrip())
    click.echo(f"{len(rows)} principal(s), {sum(row.operations for row in rows)} "
               f"operation(s) in {sum(row.events for row in rows)} event(s)", err=True)


@audit.command()
@TRAIL
@_store_options
@click.option("--tenant", required=True)
@click.option("--user", required=True, help="the data subject's user id")
@click.option("--no-verify", is_flag=True, help="report without verifying the chain first")
@click.option("--json", "as_json", is_flag=True)
def report(trail: TrailArgs, store: str | None, schema: str | None, tenant: str, user: str,
           no_verify: bool, as_json: bool) -> None:
    """What the trail records about one data subject: written, read, deleted, erased,
    denied and failed operations, when, and each erasure's receipt. No contents."""
    with _sources(trail, store, schema) as sources:
        _verify_unless(no_verify, sources)
        found = subject_report(sources, tenant, user)
    if as_json:
        body: dict[str, Any] = unstructure(found)
        body["summary"] = found.summary()
        click.echo(json.dumps(body, indent=2, sort_keys=True))
        return
    _print_report(found)


def _verify_unless(no_verify: bool, trail: tuple[Source, ...]) -> None:
    if no_verify:
        return
    verification = _verified(trail, [])
    if verification.problem is not None:
        _exit_for(verification.problem)


def _query_line(seq: int, occurred_at: float, event: dict[str, Any]) -> str:
    """One event as a line: who did what with which outcome, and why (the decision,
    the policy revision it was made under and every reason a policy gave)."""
    records = ",".join(event.get("record_ids") or ())
    reasons = list(event.get("reasons") or ())
    return (f"{seq:>7} {iso(occurred_at)} {event.get('type')} "
            f"op={event.get('operation')} outcome={event.get('outcome')} "
            f"principal={event.get('principal_id')} tenant={event.get('tenant_id')}"
            + (f" records={records}" if records else "")
            + (f" decision={event['decision_id']}" if event.get("decision_id") else "")
            + (f" policy_revision={event['policy_revision']}"
               if event.get("policy_revision") else "")
            + (f" error={event['error_code']}" if event.get("error_code") else "")
            + (f" reasons={json.dumps(reasons, ensure_ascii=False)}" if reasons else ""))


def _print_report(found: SubjectReport) -> None:
    click.echo(f"data subject {found.subject_hash} in tenant {found.tenant_id}")
    summary = found.summary()
    click.echo("  " + ", ".join(f"{name}: {summary[name]}" for name in CATEGORIES))
    for name, items in found.by_category().items():
        if not items:
            continue
        click.echo(f"{name}:")
        for item in items:
            records = f" records={','.join(item.record_ids)}" if item.record_ids else ""
            count = f" count={item.count}" if item.count is not None else ""
            why = f" reasons={'; '.join(item.reasons)}" if name == "denied" else ""
            click.echo(f"  {iso(item.occurred_at)} {item.operation} by {item.principal_id} "
                       f"({item.outcome}){records}{count}{why}")
    if not found.erasures:
        click.echo("erasure receipts: none")
    for erasure in found.erasures:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(erasure.counts.items()))
        state = "nothing was left" if erasure.nothing_left else "erased"
        check = "receipt hash verified" if erasure.receipt_verified else (
            "RECEIPT HASH DOES NOT MATCH")
        click.echo(f"erasure {erasure.request_id} by {erasure.principal_id}: {state}")
        click.echo(f"  started {iso(erasure.started_at)}  completed "
                   f"{iso(erasure.completed_at)}")
        click.echo(f"  counts: {counts}")
        click.echo(f"  receipt {erasure.receipt_hash} ({check})")
