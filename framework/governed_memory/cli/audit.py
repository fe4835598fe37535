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

This module is the ``audit`` group; its commands live beside it by what they are for
(``audit_integrity``: verify, checkpoint, export, keygen; ``audit_proofs``: prove,
consistency, verify-proof; ``audit_reading``: query, report; ``audit_c2sp``: tiles,
cosign, verifier-key, verify-note, verify-tiles: the open C2SP formats), on what every command
shares (``audit_inputs``: the trail, checkpoint and key arguments; ``audit_exits``: how
an outcome is told and which code it exits with).
"""

from __future__ import annotations

import click

from governed_memory.cli.audit_c2sp import (
    cosign,
    tiles,
    verifier_key,
    verify_note,
    verify_tiles,
)
from governed_memory.cli.audit_exits import (
    EXIT_CODES,
    EXIT_NOT_WITHIN,
    EXIT_REFUSED,
    EXIT_USAGE,
)
from governed_memory.cli.audit_inputs import (
    A_FILE,
    PROGRESS_FROM_BYTES,
    STORE_SINKS,
    TRAIL,
    TrailArgs,
)
from governed_memory.cli.audit_integrity import checkpoint, export, keygen, verify
from governed_memory.cli.audit_proofs import consistency, prove, verify_proof
from governed_memory.cli.audit_reading import SUMMARY_COLUMNS, TIME_HELP, query_, report


@click.group(commands=[verify, checkpoint, export, keygen, prove, consistency, verify_proof,
                       query_, report, tiles, cosign, verifier_key, verify_note,
                       verify_tiles])
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


__all__ = [
    "A_FILE",
    "EXIT_CODES",
    "EXIT_NOT_WITHIN",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "PROGRESS_FROM_BYTES",
    "STORE_SINKS",
    "SUMMARY_COLUMNS",
    "TIME_HELP",
    "TRAIL",
    "TrailArgs",
    "audit",
    "checkpoint",
    "consistency",
    "cosign",
    "export",
    "keygen",
    "prove",
    "query_",
    "report",
    "tiles",
    "verifier_key",
    "verify",
    "verify_note",
    "verify_proof",
    "verify_tiles",
]
