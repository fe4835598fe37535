"""The tamper-evident audit trail: a hash-chained sink, and reading it back.

``AuditSink`` appends; ``verify_trail`` proves a trail (and checkpoints) intact;
``query`` filters its events; ``subject_report`` answers "what happened to this
person's data". See ``docs/compliance.md``.
"""

from governed_memory.audit.chain import FORMAT, ChainFormatError, Checkpoint
from governed_memory.audit.query import EventFilter, TrailEntry, iter_entries, query
from governed_memory.audit.report import Erasure, SubjectActivity, SubjectReport, subject_report
from governed_memory.audit.sink import AuditChainError, AuditSink, audit_sink_from_config
from governed_memory.audit.verify import Problem, Verification, checkpoint_of, verify_trail

__all__ = [
    "FORMAT",
    "AuditChainError",
    "AuditSink",
    "ChainFormatError",
    "Checkpoint",
    "Erasure",
    "EventFilter",
    "Problem",
    "SubjectActivity",
    "SubjectReport",
    "TrailEntry",
    "Verification",
    "audit_sink_from_config",
    "checkpoint_of",
    "iter_entries",
    "query",
    "subject_report",
    "verify_trail",
]
