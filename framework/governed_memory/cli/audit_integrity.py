"""``audit verify``, ``checkpoint``, ``export`` and ``keygen``: whether a trail is intact,
and what an auditor keeps to show later that it still is.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from governed_memory.audit.proofs import KeyFileError, TreeCheckpoint
from governed_memory.audit.verify import NO_TRAIL, AnyCheckpoint, TrailProblemError, verify_trail
from governed_memory.cli.audit_exits import EXIT_CODES, exit_for, say_problem
from governed_memory.cli.audit_inputs import (
    A_FILE,
    TRAIL,
    TrailArgs,
    progress_bar,
    read_checkpoints,
    read_public_key,
    require_signed_by,
    store_options,
    stored_trail,
    trail_sources,
)
from governed_memory.converter import unstructure


@click.command()
@TRAIL
@store_options
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
    found = read_checkpoints(checkpoint_files)
    key = read_public_key(public_key)
    if key is not None:
        require_signed_by(key, found)
        if not trail and store is None:
            _say_signed(found, as_json)
            return
    checkpoints = [checkpoint for _, checkpoint in found]
    with trail_sources(trail, store, schema) as sources:
        with progress_bar(sources, "verifying") as progress:
            verification = verify_trail(sources, checkpoints, progress=progress)
        stored = stored_trail(sources)
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
        say_problem(verification.problem)
    if verification.problem is not None:
        exit_for(verification.problem)


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


@click.command()
@TRAIL
@store_options
@click.option("--sign", "key_file", type=A_FILE, default=None, metavar="KEYFILE",
              help="sign it with this Ed25519 private key (PEM PKCS 8, unencrypted, "
                   "mode 600)")
@click.option("--note", "note_file", type=click.Path(dir_okay=False, path_type=Path),
              default=None,
              help="with --sign, also write it here as a C2SP tlog-checkpoint in a signed "
                   "note (what open transparency-log tools verify)")
@click.option("--origin", default=None,
              help="the note's origin line, the log's identity (default "
                   "governed-memory/<chain id>)")
@click.option("--key-name", default=None,
              help="the note's signing key name (default: the origin)")
def checkpoint(trail: TrailArgs, store: str | None, schema: str | None,
               key_file: Path | None, note_file: Path | None, origin: str | None,
               key_name: str | None) -> None:
    """Print a checkpoint of a trail that verifies (entry count, Merkle root and chain
    head, optionally signed), to keep apart from the trail and pass to ``audit verify
    --checkpoint``, ``audit prove`` and ``audit consistency`` later. With --note, the
    same tree is also written as a signed C2SP checkpoint (``audit tiles``,
    ``verifier-key``)."""
    from governed_memory.audit.verify import tree_checkpoint_of

    if note_file is None and (origin or key_name):
        raise click.UsageError("--origin and --key-name name the C2SP note: give --note")
    if note_file is not None and key_file is None:
        raise click.UsageError("a C2SP checkpoint is signed: give --sign KEYFILE with --note")
    if origin is not None or key_name is not None:
        from governed_memory.audit.notes import NoteFormatError, check_key_name

        try:
            check_key_name(origin or "-", "an origin")
            check_key_name(key_name or origin or "-", "a key name")
        except NoteFormatError as exc:
            raise click.BadParameter(str(exc)) from None
    key = None
    if key_file is not None:  # before the long walk: a bad key fails at once
        from governed_memory.audit.signing import load_private_key

        try:
            key = load_private_key(key_file)
        except KeyFileError as exc:
            raise click.BadParameter(str(exc), param_hint="--sign") from None
    try:
        with trail_sources(trail, store, schema) as sources, \
                progress_bar(sources, "checkpointing") as progress:
            found = tree_checkpoint_of(sources, time.time(), progress=progress)
    except TrailProblemError as exc:
        say_problem(exc.problem)
        exit_for(exc.problem)
    if key is not None:
        from governed_memory.audit.signing import sign_checkpoint

        found = sign_checkpoint(found, key)
    if note_file is not None and key is not None:
        from governed_memory.audit.checkpoint_notes import checkpoint_note
        from governed_memory.audit.notes import NoteFormatError

        try:
            note = checkpoint_note(found, key, origin=origin, key_name=key_name)
        except NoteFormatError as exc:  # a chain id no origin can hold
            raise click.BadParameter(f"{exc}: give --origin", param_hint="--note") from None
        note_file.write_bytes(note.to_bytes())
    click.echo(found.to_json())


@click.command()
@TRAIL
@store_options
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

    with trail_sources(trail, store, schema) as sources:
        stored = stored_trail(sources)
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


@click.command()
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
