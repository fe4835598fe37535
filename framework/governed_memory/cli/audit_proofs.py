"""``audit prove``, ``consistency`` and ``verify-proof``: Merkle proofs against a checkpoint.

Proving reads the trail; checking a proof needs nothing but the proof, the
checkpoint(s) and the event (:mod:`governed_memory.audit.proofs`), so an auditor can
check what they were handed without the trail.
"""

from __future__ import annotations

from pathlib import Path

import click

from governed_memory.audit.proofs import (
    ConsistencyProof,
    InclusionProof,
    ProofError,
    ProofFormatError,
    load_document,
    load_event,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit.strict_json import JsonDocumentError
from governed_memory.audit.verify import TrailProblemError
from governed_memory.cli.audit_c2sp import check_witnesses, witness_options
from governed_memory.cli.audit_exits import bad_document, refuse, trail_failure
from governed_memory.cli.audit_inputs import (
    A_FILE,
    TRAIL,
    TrailArgs,
    progress_bar,
    read_public_key,
    read_tree_checkpoint,
    require_signed_by,
    store_options,
    trail_sources,
)


@click.command()
@click.argument("event_id")
@TRAIL
@store_options
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

    cp = read_tree_checkpoint(checkpoint_file)
    key = read_public_key(public_key)
    if key is not None:
        require_signed_by(key, [(str(checkpoint_file), cp)])
    try:
        with trail_sources(trail, store, schema) as sources, \
                progress_bar(sources, "proving") as progress:
            proof, event = prove_inclusion(sources, event_id, cp, progress=progress)
    except (TrailProblemError, EventNotInTreeError, ProofError) as exc:
        trail_failure(exc)
    if event_out is not None:
        event_out.write_bytes(event + b"\n")
    click.echo(proof.to_json())
    click.echo(f"event {event_id} is entry {proof.seq} of {proof.tree_size} "
               f"({len(proof.audit_path)} hashes)", err=True)


@click.command()
@click.argument("first", type=A_FILE)
@click.argument("second", type=A_FILE)
@TRAIL
@store_options
@click.option("--public-key", type=A_FILE, default=None,
              help="refuse (exit 5) unless both checkpoints are signed by this key")
@witness_options
def consistency(first: Path, second: Path, trail: TrailArgs, store: str | None,
                schema: str | None, public_key: Path | None, cosigned_file: Path | None,
                witnesses: tuple[str, ...], quorum: int | None) -> None:
    """Print a consistency proof (JSON) that checkpoint SECOND's tree extends FIRST's:
    nothing FIRST covers was changed or removed by the time SECOND was taken. With a
    witness policy, refuse (exit 5) unless SECOND's C2SP note is cosigned by K of the
    witnesses."""
    from governed_memory.audit.proofs import TreeSizeError
    from governed_memory.audit.proving import prove_consistency

    older, newer = read_tree_checkpoint(first, "FIRST"), read_tree_checkpoint(second, "SECOND")
    key = read_public_key(public_key)
    if key is not None:
        require_signed_by(key, [(str(first), older), (str(second), newer)])
    check_witnesses(cosigned_file, witnesses, quorum, newer, "SECOND")
    if older.tree_size > newer.tree_size:
        raise click.BadParameter(f"FIRST covers {older.tree_size} entries, SECOND "
                                 f"{newer.tree_size}: give the older checkpoint first")
    try:
        with trail_sources(trail, store, schema) as sources, \
                progress_bar(sources, "proving") as progress:
            proof = prove_consistency(sources, older, newer, progress=progress)
    except TreeSizeError as exc:
        raise click.BadParameter(str(exc)) from None
    except (TrailProblemError, ProofError) as exc:
        trail_failure(exc)
    click.echo(proof.to_json())


@click.command("verify-proof")
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
@witness_options
def verify_proof(proof_file: Path, checkpoint_file: Path, event_file: Path | None,
                 earlier_file: Path | None, public_key: Path | None,
                 cosigned_file: Path | None, witnesses: tuple[str, ...],
                 quorum: int | None) -> None:
    """Check an inclusion or consistency proof with nothing but it, the checkpoint(s)
    and the event: no trail needed. With a witness policy (--cosigned, --witness,
    --quorum), the checkpoint must also be cosigned by K of the witnesses. Exit 5
    (REFUSED) and why, if it does not hold."""
    try:
        document = load_document(proof_file.read_bytes(), source=str(proof_file))
    except JsonDocumentError as exc:
        bad_document(exc)
    except ProofFormatError as exc:
        if "unknown format" in str(exc):
            raise click.BadParameter(str(exc), param_hint="PROOF") from None
        refuse(f"{proof_file}: {exc}")
    later = read_tree_checkpoint(checkpoint_file)
    key = read_public_key(public_key)
    also = check_witnesses(cosigned_file, witnesses, quorum, later, "--checkpoint")
    try:
        if isinstance(document, InclusionProof):
            if event_file is None:
                raise click.UsageError("an inclusion proof is checked with the event: "
                                       "give --event")
            try:
                event = load_event(event_file.read_bytes(), source=str(event_file))
            except JsonDocumentError as exc:
                bad_document(exc)
            verify_inclusion(event, document, later, public_key=key)
            click.echo(f"OK event {document.event_id} is entry {document.seq} of chain "
                       f"{later.chain_id} at {later.tree_size} entries (root {later.root})"
                       + (f", signed by {later.key_id}" if key is not None else "") + also)
        elif isinstance(document, ConsistencyProof):
            if earlier_file is None:
                raise click.UsageError("a consistency proof is checked against two "
                                       "checkpoints: give --earlier")
            earlier = read_tree_checkpoint(earlier_file, "--earlier")
            verify_consistency(earlier, later, document, public_key=key)
            click.echo(f"OK chain {later.chain_id} at {later.tree_size} entries extends "
                       f"itself at {earlier.tree_size} entries"
                       + (f", both signed by {later.key_id}" if key is not None else "")
                       + also)
        else:
            raise click.BadParameter(f"{proof_file}: a checkpoint, not a proof",
                                     param_hint="PROOF")
    except ProofError as exc:
        refuse(str(exc))
