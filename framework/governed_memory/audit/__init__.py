"""The tamper-evident audit trail: a hash-chained sink, and reading it back.

``AuditSink`` appends; ``verify_trail`` proves a trail (and checkpoints) intact;
``query`` filters its events; ``principal_summary`` sums them up per principal (who
touched it, how often, allowed or denied); ``subject_report`` answers "what happened to
this person's data"; ``parse_time`` reads a time as an auditor types it (``1h``,
``2 days ago``, ISO 8601). Every JSON text is read by ``read_json``, which refuses a
duplicate key (``DuplicateKeyError``) and other JSON no writer of the trail produces.
``tree_checkpoint_of`` takes a Merkle checkpoint (``sign_checkpoint`` signs it),
``prove_inclusion`` and ``prove_consistency`` prove against checkpoints, and
``governed_memory.audit.proofs`` checks those proofs with nothing else at hand. A trail
kept in a database is read through ``StoredTrail`` (every function above takes one where
it takes a trail's files) and written out as files by ``export_trail``. See
``docs/compliance.md``.

The names are imported on first use (PEP 562): an auditor's
``from governed_memory.audit.proofs import verify_inclusion`` must not load the sink,
asyncio or the event model along with this package. ``query`` alone is bound now: it
is also a submodule's name, and importing that submodule later would put the module
where the function is expected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.audit.query import EventFilter, TrailEntry, iter_entries, query
from governed_memory.exports import lazy_exports

if TYPE_CHECKING:
    from governed_memory.audit.chain import FORMAT, ChainFormatError, Checkpoint
    from governed_memory.audit.export import Exported, ExportError, export_trail
    from governed_memory.audit.proofs import (
        ConsistencyProof,
        InclusionProof,
        ProofError,
        TreeCheckpoint,
        verify_consistency,
        verify_inclusion,
    )
    from governed_memory.audit.proving import (
        EventNotInTreeError,
        prove_consistency,
        prove_inclusion,
    )
    from governed_memory.audit.report import (
        Erasure,
        SubjectActivity,
        SubjectReport,
        subject_report,
    )
    from governed_memory.audit.signing import generate_key_pair, sign_checkpoint
    from governed_memory.audit.sink import AuditChainError, AuditSink, audit_sink_from_config
    from governed_memory.audit.stored import StoredTrail, TrailStore
    from governed_memory.audit.strict_json import DuplicateKeyError, JsonDocumentError, read_json
    from governed_memory.audit.summary import PrincipalActivity, principal_summary
    from governed_memory.audit.times import parse_time
    from governed_memory.audit.verify import (
        Problem,
        Verification,
        checkpoint_of,
        tree_checkpoint_of,
        verify_trail,
    )

_HOMES = {
    "chain": ("FORMAT", "ChainFormatError", "Checkpoint"),
    "export": ("ExportError", "Exported", "export_trail"),
    "proofs": ("ConsistencyProof", "InclusionProof", "ProofError", "TreeCheckpoint",
               "verify_consistency", "verify_inclusion"),
    "proving": ("EventNotInTreeError", "prove_consistency", "prove_inclusion"),
    "report": ("Erasure", "SubjectActivity", "SubjectReport", "subject_report"),
    "signing": ("generate_key_pair", "sign_checkpoint"),
    "sink": ("AuditChainError", "AuditSink", "audit_sink_from_config"),
    "stored": ("StoredTrail", "TrailStore"),
    "strict_json": ("DuplicateKeyError", "JsonDocumentError", "read_json"),
    "summary": ("PrincipalActivity", "principal_summary"),
    "times": ("parse_time",),
    "verify": ("Problem", "Verification", "checkpoint_of", "tree_checkpoint_of",
               "verify_trail"),
}

__getattr__, __dir__ = lazy_exports(
    __name__, {name: module for module, names in _HOMES.items() for name in names})

__all__ = [
    "FORMAT",
    "AuditChainError",
    "AuditSink",
    "ChainFormatError",
    "Checkpoint",
    "ConsistencyProof",
    "DuplicateKeyError",
    "Erasure",
    "EventFilter",
    "EventNotInTreeError",
    "ExportError",
    "Exported",
    "InclusionProof",
    "JsonDocumentError",
    "PrincipalActivity",
    "Problem",
    "ProofError",
    "StoredTrail",
    "SubjectActivity",
    "SubjectReport",
    "TrailEntry",
    "TrailStore",
    "TreeCheckpoint",
    "Verification",
    "audit_sink_from_config",
    "checkpoint_of",
    "export_trail",
    "generate_key_pair",
    "iter_entries",
    "parse_time",
    "principal_summary",
    "prove_consistency",
    "prove_inclusion",
    "query",
    "read_json",
    "sign_checkpoint",
    "subject_report",
    "tree_checkpoint_of",
    "verify_consistency",
    "verify_inclusion",
    "verify_trail",
]
