"""``audit tiles``, ``cosign``, ``verifier-key`` and ``verify-note``: the trail in the
open C2SP formats, so an auditor checks it with tools that do not come from here.

``tiles`` publishes the trail's Merkle tree and entries as static files (tlog-tiles)
beside a signed tlog-checkpoint; ``cosign`` is a witness countersigning a checkpoint
after checking it extends the last one it countersigned; ``verifier-key`` prints a key
in the form note verifiers take; ``verify-note`` checks a checkpoint note and its
cosignatures. The witness policy options (``--cosigned``, ``--witness``, ``--quorum``)
are shared with ``verify-proof`` and ``consistency``. See docs/compliance.md.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from governed_memory.audit.notes import NoteFormatError, VerifierKey
from governed_memory.audit.proofs import (
    ForeignTrailError,
    KeyFileError,
    ProofError,
    TreeCheckpoint,
)
from governed_memory.audit.verify import TrailProblemError
from governed_memory.cli.audit_exits import exit_for, refuse, say_problem
from governed_memory.cli.audit_inputs import (
    A_FILE,
    TRAIL,
    TrailArgs,
    progress_bar,
    read_public_key,
    read_tree_checkpoint,
    store_options,
    trail_sources,
)

KEY_HELP = "a verifier key (<name>+<hex id>+<base64>), or a file holding one per line"


def read_verifier_keys(values: tuple[str, ...] | list[str], option: str) -> list[VerifierKey]:
    """Verifier keys given inline, or as files of one key a line (``#`` comments)."""
    found: list[VerifierKey] = []
    for value in values:
        path = Path(value)
        lines = [value]
        if path.is_file():
            lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        for line in lines:
            if not line or line.startswith("#"):
                continue
            try:
                found.append(VerifierKey.parse(line))
            except NoteFormatError as exc:
                raise click.BadParameter(f"{value}: {exc}", param_hint=option) from None
    return found


def read_one_key(value: str, option: str) -> VerifierKey:
    keys = read_verifier_keys([value], option)
    if len(keys) != 1:
        raise click.BadParameter(f"{value}: give one verifier key", param_hint=option)
    return keys[0]


def read_note_file(path: Path, option: str) -> bytes:
    from governed_memory.audit.checkpoint_notes import read_checkpoint_note

    data = path.read_bytes()
    try:
        read_checkpoint_note(data)
    except NoteFormatError as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint=option) from None
    return data


def witness_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--cosigned NOTE --witness KEY... [--quorum K]``: refuse unless the checkpoint's
    C2SP note carries valid cosignatures by K of the given witnesses."""
    command = click.option(
        "--quorum", type=click.IntRange(min=0), default=None,
        help="how many of the --witness keys must have cosigned (default: all)")(command)
    command = click.option(
        "--witness", "witnesses", multiple=True, metavar="KEY",
        help=f"a witness the policy trusts: {KEY_HELP} (type 0x04, from `audit "
             "verifier-key --witness`); repeat for several")(command)
    return click.option(
        "--cosigned", "cosigned_file", type=A_FILE, default=None, metavar="NOTE",
        help="the (later) checkpoint as a C2SP note carrying witness cosignatures "
             "(`audit cosign`'s output)")(command)


def check_witnesses(cosigned_file: Path | None, witnesses: tuple[str, ...],
                    quorum: int | None, checkpoint: TreeCheckpoint, where: str) -> str:
    """Apply the witness policy to ``checkpoint`` (exit 5 if it does not hold); what to
    add to the OK line (nothing without a policy)."""
    from governed_memory.audit.witness import witness_policy

    if cosigned_file is None and not witnesses:
        if quorum is not None:
            raise click.UsageError("--quorum is a witness policy's: give --cosigned and "
                                   "--witness too")
        return ""
    if cosigned_file is None or not witnesses:
        raise click.UsageError("a witness policy needs the cosigned note (--cosigned) and "
                               "the witnesses it trusts (--witness)")
    keys = read_verifier_keys(witnesses, "--witness")
    wanted = len(keys) if quorum is None else quorum
    if wanted > len(keys):
        raise click.BadParameter(f"a quorum of {wanted} cannot be met by {len(keys)} "
                                 "witness key(s)", param_hint="--quorum")
    data = read_note_file(cosigned_file, "--cosigned")
    try:
        verified = witness_policy(data, checkpoint, keys, wanted)
    except ProofError as exc:
        refuse(f"{cosigned_file}: {where}: {exc}")
    return (f", cosigned by {len(verified)} of {len(keys)} witness(es) "
            f"({', '.join(v.key.name for v in verified)})")


def _key_from(key_file: Path, option: str) -> Any:
    from governed_memory.audit.signing import load_private_key

    try:
        return load_private_key(key_file)
    except KeyFileError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


@click.command()
@TRAIL
@store_options
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="the directory to publish into (new, or one this command wrote before: "
                   "it is extended)")
@click.option("--checkpoint", "checkpoint_file", type=A_FILE, default=None,
              help="publish the tree of this Merkle checkpoint (`audit checkpoint`'s); "
                   "without it, one is taken now, verifying the whole trail")
@click.option("--sign", "key_file", type=A_FILE, default=None, metavar="KEYFILE",
              help="sign the C2SP checkpoint with this Ed25519 private key")
@click.option("--note", "note_file", type=A_FILE, default=None,
              help="publish this signed C2SP checkpoint (`audit checkpoint --note`'s) "
                   "instead of signing one here")
@click.option("--origin", default=None,
              help="the log's identity on the checkpoint's first line (default "
                   "governed-memory/<chain id>)")
@click.option("--key-name", default=None, help="the signing key's name (default: the origin)")
def tiles(trail: TrailArgs, store: str | None, schema: str | None, out: Path,
          checkpoint_file: Path | None, key_file: Path | None, note_file: Path | None,
          origin: str | None, key_name: str | None) -> None:
    """Publish the trail as a C2SP transparency log: the Merkle tree in tiles, the
    events in entry bundles and the signed checkpoint, as static files in OUT. Run it
    again on a grown trail and only what changed is written. Exit 1 (BROKEN) if the
    trail does not match the checkpoint or the tiles already published."""
    from governed_memory.audit.checkpoint_notes import checkpoint_note, read_checkpoint_note
    from governed_memory.audit.notes import Note
    from governed_memory.audit.tile_writer import (
        TilesConflictError,
        TilesError,
        publish_tiles,
    )
    from governed_memory.audit.trail_entries import TrailEntries

    if (key_file is None) == (note_file is None):
        raise click.UsageError("give --sign KEYFILE (sign the checkpoint here) or --note "
                               "NOTE (publish a checkpoint signed elsewhere), one of them")
    if note_file is not None and (origin or key_name):
        raise click.UsageError("--origin and --key-name are the signer's: the note states "
                               "its own")
    key = _key_from(key_file, "--sign") if key_file is not None else None
    given = read_tree_checkpoint(checkpoint_file) if checkpoint_file is not None else None
    note: Note | None = None
    if note_file is not None:
        note = Note.parse(read_note_file(note_file, "--note"))
        if given is not None:
            try:
                read_checkpoint_note(note.to_bytes())[1].matches(given)
            except ProofError as exc:
                refuse(f"{note_file}: {exc}")
    try:
        with trail_sources(trail, store, schema) as sources:
            entries = TrailEntries(sources)
            if given is not None and given.chain_id != entries.chain_id:
                refuse(str(ForeignTrailError(f"the checkpoint is of chain {given.chain_id}, "
                                             f"the trail is chain {entries.chain_id}")))
            if note is None:
                assert key is not None
                if given is None:
                    from governed_memory.audit.verify import tree_checkpoint_of

                    with progress_bar(sources, "checkpointing") as progress:
                        given = tree_checkpoint_of(sources, time.time(), progress=progress)
                try:
                    note = checkpoint_note(given, key, origin=origin, key_name=key_name)
                except NoteFormatError as exc:
                    raise click.BadParameter(str(exc)) from None
            done = publish_tiles(entries, out, note)
    except TrailProblemError as exc:
        say_problem(exc.problem)
        exit_for(exc.problem)
    except TilesConflictError as exc:
        raise click.BadParameter(str(exc), param_hint="--out") from None
    except (TilesError, ProofError) as exc:
        refuse(str(exc))
    grew = f" (was {done.previous_size})" if done.previous_size else ""
    click.echo(f"tiles {out}: log {done.origin} at {done.size} entries{grew}: "
               f"{done.tiles} tile(s) and {done.bundles} entry bundle(s) written, "
               f"{done.removed} partial one(s) replaced"
               + (", checkpoint written" if done.checkpoint_written else ""))


@click.command()
@click.argument("note_file", metavar="[CHECKPOINT]", type=A_FILE, required=False)
@click.option("--tiles", "tiles_dir", required=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="the log's tiles (`audit tiles`'s directory): the consistency proof "
                   "from the last cosigned checkpoint is read from them")
@click.option("--log-key", required=True, help=f"the log's key: {KEY_HELP}")
@click.option("--key", "key_file", required=True, type=A_FILE,
              help="the witness's Ed25519 private key (PEM, mode 600; `audit keygen`)")
@click.option("--name", required=True, help="the witness's name, e.g. witness.example/w1")
@click.option("--state", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="the witness's state file: the last checkpoint it cosigned, per log")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the cosigned note here instead of printing it")
def cosign(note_file: Path | None, tiles_dir: Path, log_key: str, key_file: Path, name: str,
           state: Path, out: Path | None) -> None:
    """As a witness, countersign CHECKPOINT (by default TILES/checkpoint), a C2SP
    checkpoint note, after checking the log's signature and that it extends the last
    checkpoint this witness cosigned for the log: no rollback, no fork, a consistency
    proof from the tiles that verifies. Prints the note with the cosignature added.
    Exit 5 (REFUSED) and why when it does not hold; the state is then unchanged."""
    from governed_memory.audit.tiles import CHECKPOINT_FILE, TileDirectory
    from governed_memory.audit.witness import WitnessStateError, cosign_checkpoint

    source = note_file or tiles_dir / CHECKPOINT_FILE
    data = read_note_file(source, "CHECKPOINT")
    log = read_one_key(log_key, "--log-key")
    key = _key_from(key_file, "--key")
    try:
        done = cosign_checkpoint(data, TileDirectory(tiles_dir), log_key=log, key=key,
                                 name=name, state=state, now=int(time.time()))
    except WitnessStateError as exc:
        raise click.BadParameter(str(exc), param_hint="--state") from None
    except NoteFormatError as exc:
        raise click.BadParameter(str(exc)) from None
    except ProofError as exc:
        refuse(f"{source}: {exc}")
    text = done.note.to_bytes()
    if out is not None:
        out.write_bytes(text)
    else:
        click.echo(text.decode("utf-8"), nl=False)
    since = ("the first checkpoint of this log it sees" if done.previous_size is None
             else f"extends {done.previous_size} entries ({done.proof_length} hashes)")
    click.echo(f"cosigned {done.origin} at {done.size} entries: {since}", err=True)


@click.command("verifier-key")
@click.argument("public_key", type=A_FILE)
@click.option("--name", required=True, help="the key's name (a log's: its origin)")
@click.option("--witness", "cosigner", is_flag=True,
              help="a witness's key: its cosignatures are cosignature/v1 (type 0x04)")
def verifier_key(public_key: Path, name: str, cosigner: bool) -> None:
    """Print PUBLIC_KEY (PEM, `audit keygen`'s) as a signed-note verifier key,
    <name>+<hex key id>+<base64 key>: what Go's sumdb/note, witnesses and
    `goverify` take."""
    key = read_public_key(public_key)
    try:
        click.echo(VerifierKey.of(name, key, cosigner=cosigner).text())
    except NoteFormatError as exc:
        raise click.BadParameter(str(exc), param_hint="--name") from None


@click.command("verify-note")
@click.argument("note_file", metavar="NOTE", type=A_FILE)
@click.option("--log-key", required=True, help=f"the log's key: {KEY_HELP}")
@click.option("--witness", "witnesses", multiple=True, metavar="KEY",
              help=f"a witness the policy trusts: {KEY_HELP}; repeat for several")
@click.option("--quorum", type=click.IntRange(min=0), default=None,
              help="how many of the --witness keys must have cosigned (default: all)")
@click.option("--checkpoint", "checkpoint_file", type=A_FILE, default=None,
              help="a Merkle checkpoint (JSON) the note must state the tree of")
def verify_note(note_file: Path, log_key: str, witnesses: tuple[str, ...],
                quorum: int | None, checkpoint_file: Path | None) -> None:
    """Check a C2SP checkpoint note: the log's signature, and with --witness the
    witnesses' cosignatures (K of them, --quorum). Exit 5 (REFUSED) if it does not hold."""
    from governed_memory.audit.checkpoint_notes import read_checkpoint_note
    from governed_memory.audit.notes import require_quorum

    data = read_note_file(note_file, "NOTE")
    log = read_one_key(log_key, "--log-key")
    keys = read_verifier_keys(witnesses, "--witness")
    wanted = len(keys) if quorum is None else quorum
    if wanted > len(keys):
        raise click.BadParameter(f"a quorum of {wanted} cannot be met by {len(keys)} "
                                 "witness key(s)", param_hint="--quorum")
    note, body = read_checkpoint_note(data)
    try:
        note.verify([log])
        cosigned = require_quorum(note, keys, wanted) if keys else []
        if checkpoint_file is not None:
            body.matches(read_tree_checkpoint(checkpoint_file))
    except ProofError as exc:
        refuse(f"{note_file}: {exc}")
    by = "".join(f", cosigned by {v.key.name} at {v.timestamp}" for v in cosigned)
    click.echo(f"OK {body.origin} at {body.size} entries, root "
               f"{base64.b64encode(body.root).decode('ascii')}, signed by {log.name}{by}")


@click.command("verify-tiles")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--log-key", required=True, help=f"the log's key: {KEY_HELP}")
@witness_options
def verify_tiles(directory: Path, log_key: str, cosigned_file: Path | None,
                 witnesses: tuple[str, ...], quorum: int | None) -> None:
    """Check a published log (`audit tiles`'s DIRECTORY, or a copy of it) as an auditor
    would: the checkpoint's signature by the log key, then every entry bundle hashed,
    every tile recomputed and compared, the root compared with the checkpoint's, and no
    file the tree does not have. Exit 5 (REFUSED) and the first difference."""
    from governed_memory.audit.checkpoint_notes import read_checkpoint_note
    from governed_memory.audit.tiles import CHECKPOINT_FILE, check_directory

    source = directory / CHECKPOINT_FILE
    if not source.is_file():
        raise click.BadParameter(f"{source}: no checkpoint here", param_hint="DIRECTORY")
    note, body = read_checkpoint_note(read_note_file(source, "DIRECTORY"))
    log = read_one_key(log_key, "--log-key")
    also = ""
    try:
        note.verify([log])
        if cosigned_file is not None or witnesses:
            from governed_memory.audit.proofs import EMPTY_ROOT

            stated = TreeCheckpoint("chain_x", body.size, body.root.hex(), EMPTY_ROOT.hex(), 0.0)
            also = check_witnesses(cosigned_file, witnesses, quorum, stated, "the checkpoint")
        tiles, bundles = check_directory(directory, body.root, body.size)
    except ProofError as exc:
        refuse(f"{directory}: {exc}")
    click.echo(f"OK {body.origin} at {body.size} entries: {tiles} tile(s) and {bundles} "
               f"entry bundle(s) give the signed root "
               f"{base64.b64encode(body.root).decode('ascii')}{also}")


__all__ = [
    "check_witnesses",
    "cosign",
    "read_verifier_keys",
    "tiles",
    "verifier_key",
    "verify_note",
    "verify_tiles",
    "witness_options",
]
