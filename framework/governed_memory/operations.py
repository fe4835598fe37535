"""The closed set of memory operations and what each one needs.

One table maps an operation to its event family (read / write), the permission the
scope-authorization rule demands, and its OpenTelemetry GenAI operation name, so that
no call site decides these on its own.
"""

from __future__ import annotations

import enum

import attrs

from governed_memory.principal import Permission


class OperationKind(enum.StrEnum):
    READ = "read"
    WRITE = "write"
    INDEX = "index"
    """Store-wide work on the indexing outbox (``governed_memory.maintenance``), and the
    extraction queue (``governed_memory.extraction_requests``: a caller enqueues, an
    operator's worker leases and settles): its events are the index lifecycle,
    ``memory.index.*``. It changes no memory (a job's facts are its principal's own
    writes)."""
    MAINTENANCE = "maintenance"
    """Store-wide housekeeping (retention of retrieval snapshots, removal of expired
    records): the maintenance worker's ``memory.maintenance.*`` events. It changes
    nothing a read can see: what it removes is already invisible to every read."""
    AUDIT = "audit"
    """Reading the audit trail (``governed_memory.audit_requests``): an auditor's query,
    subject report, verification and proofs, with ``memory.audit.*`` events. It reads
    no memory."""


@attrs.frozen(slots=True)
class _OperationInfo:
    kind: OperationKind
    permission: Permission
    gen_ai_name: str


class Operation(enum.StrEnum):
    ADD = "add"
    GET = "get"
    LOOKUP = "lookup"
    """``get`` for a caller that expects a miss (a summary not written yet): the answer
    is the record or nothing, and a miss is a completed read, not a rejected one."""
    LIST = "list"
    SEARCH = "search"
    UPDATE = "update"
    DELETE = "delete"
    HISTORY = "history"
    DELETE_ALL = "delete_all"
    DELETE_USER = "delete_user"
    PURGE_EXPIRED = "purge_expired"
    LIST_PENDING = "list_pending"
    """The review queue: records held as ``pending_review`` in one scope."""
    APPROVE = "approve"
    REJECT = "reject"
    # The conversation and working-state tiers, and the per-turn context record
    # (governed_memory.tiers): the same choke point, policies and events as memories.
    APPEND_TURN = "append_turn"
    RECENT_TURNS = "recent_turns"
    LIST_TURNS = "list_turns"
    CLEAR_TURNS = "clear_turns"
    READ_WORKING_STATE = "read_working_state"
    UPDATE_WORKING_STATE = "update_working_state"
    CLEAR_WORKING_STATE = "clear_working_state"
    RECORD_CONTEXT = "record_context"
    RECORD_EXTRACTION = "record_extraction"
    RECORD_REMEMBER = "record_remember"
    """What one ``remember`` call decided, fact by fact (ids, decisions, reasons)."""
    ERASE_USER_TURNS = "erase_user_turns"
    # Memory blocks (governed_memory.tiers.blocks): the named texts an agent edits.
    READ_BLOCKS = "read_blocks"
    EDIT_BLOCK = "edit_block"
    BLOCK_HISTORY = "block_history"
    ERASE_USER_BLOCKS = "erase_user_blocks"
    REPLAY = "replay"
    """Replay a stored retrieval snapshot (``governed_memory.replay``)."""
    SNAPSHOT_HEADER = "snapshot_header"
    """Find the scopes a snapshot covers, before replaying it."""
    # Store-wide indexing work (governed_memory.maintenance): an operator's.
    INDEX_STATUS = "index_status"
    PROCESS_INDEX_JOBS = "process_index_jobs"
    RETRY_INDEX_JOBS = "retry_index_jobs"
    REINDEX = "reindex"
    PURGE_SNAPSHOTS = "purge_snapshots"
    PURGE_EXPIRED_ALL = "purge_expired_all"
    """Remove a bounded batch of expired records of every scope (the maintenance round's
    data minimisation; ``purge_expired`` is the same for one scope, by hand)."""
    # The extraction queue (governed_memory.extraction_requests): a caller queues a
    # turn's extraction; an operator's worker leases, settles and requeues the jobs.
    ENQUEUE_EXTRACTION = "enqueue_extraction"
    EXTRACTION_STATUS = "extraction_status"
    LEASE_EXTRACTION_JOBS = "lease_extraction_jobs"
    SETTLE_EXTRACTION_JOBS = "settle_extraction_jobs"
    RETRY_EXTRACTION_JOBS = "retry_extraction_jobs"
    # Reading the audit trail (governed_memory.audit_requests): an auditor's.
    AUDIT_QUERY = "audit_query"
    AUDIT_REPORT = "audit_report"
    AUDIT_VERIFY = "audit_verify"
    AUDIT_PROVE = "audit_prove"

    @property
    def info(self) -> _OperationInfo:
        return _INFO[self]

    @property
    def kind(self) -> OperationKind:
        return _INFO[self].kind

    @property
    def permission(self) -> Permission:
        return _INFO[self].permission

    @property
    def gen_ai_name(self) -> str:
        return _INFO[self].gen_ai_name


_R, _W, _I = OperationKind.READ, OperationKind.WRITE, OperationKind.INDEX
_INFO: dict[Operation, _OperationInfo] = {
    Operation.ADD: _OperationInfo(_W, Permission.WRITE, "create_memory"),
    Operation.GET: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.LOOKUP: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.LIST: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.SEARCH: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.UPDATE: _OperationInfo(_W, Permission.WRITE, "update_memory"),
    Operation.DELETE: _OperationInfo(_W, Permission.DELETE, "delete_memory"),
    Operation.HISTORY: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.DELETE_ALL: _OperationInfo(_W, Permission.ADMIN, "delete_memory"),
    Operation.DELETE_USER: _OperationInfo(_W, Permission.ADMIN, "delete_memory"),
    Operation.PURGE_EXPIRED: _OperationInfo(_W, Permission.ADMIN, "delete_memory"),
    Operation.LIST_PENDING: _OperationInfo(_R, Permission.REVIEW, "search_memory"),
    Operation.APPROVE: _OperationInfo(_W, Permission.REVIEW, "update_memory"),
    Operation.REJECT: _OperationInfo(_W, Permission.REVIEW, "delete_memory"),
    Operation.APPEND_TURN: _OperationInfo(_W, Permission.WRITE, "create_memory"),
    Operation.RECENT_TURNS: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.LIST_TURNS: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.CLEAR_TURNS: _OperationInfo(_W, Permission.DELETE, "delete_memory"),
    Operation.READ_WORKING_STATE: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.UPDATE_WORKING_STATE: _OperationInfo(_W, Permission.WRITE, "update_memory"),
    Operation.CLEAR_WORKING_STATE: _OperationInfo(_W, Permission.DELETE, "delete_memory"),
    Operation.RECORD_CONTEXT: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.RECORD_EXTRACTION: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.RECORD_REMEMBER: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.ERASE_USER_TURNS: _OperationInfo(_W, Permission.ADMIN, "delete_memory"),
    Operation.READ_BLOCKS: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.EDIT_BLOCK: _OperationInfo(_W, Permission.WRITE, "update_memory"),
    Operation.BLOCK_HISTORY: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.ERASE_USER_BLOCKS: _OperationInfo(_W, Permission.ADMIN, "delete_memory"),
    Operation.REPLAY: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.SNAPSHOT_HEADER: _OperationInfo(_R, Permission.READ, "search_memory"),
    Operation.INDEX_STATUS: _OperationInfo(_I, Permission.ADMIN, "index_status"),
    Operation.PROCESS_INDEX_JOBS: _OperationInfo(_I, Permission.ADMIN, "index_memory"),
    Operation.RETRY_INDEX_JOBS: _OperationInfo(_I, Permission.ADMIN, "index_memory"),
    Operation.REINDEX: _OperationInfo(_I, Permission.ADMIN, "index_memory"),
    Operation.PURGE_SNAPSHOTS: _OperationInfo(OperationKind.MAINTENANCE, Permission.ADMIN,
                                              "delete_memory"),
    Operation.PURGE_EXPIRED_ALL: _OperationInfo(OperationKind.MAINTENANCE, Permission.ADMIN,
                                                "delete_memory"),
    Operation.ENQUEUE_EXTRACTION: _OperationInfo(_I, Permission.WRITE, "index_memory"),
    Operation.EXTRACTION_STATUS: _OperationInfo(_I, Permission.ADMIN, "index_status"),
    Operation.LEASE_EXTRACTION_JOBS: _OperationInfo(_I, Permission.ADMIN, "index_memory"),
    Operation.SETTLE_EXTRACTION_JOBS: _OperationInfo(_I, Permission.ADMIN, "index_memory"),
    Operation.RETRY_EXTRACTION_JOBS: _OperationInfo(_I, Permission.ADMIN, "index_memory"),
    Operation.AUDIT_QUERY: _OperationInfo(OperationKind.AUDIT, Permission.AUDIT, "audit_query"),
    Operation.AUDIT_REPORT: _OperationInfo(OperationKind.AUDIT, Permission.AUDIT,
                                           "audit_report"),
    Operation.AUDIT_VERIFY: _OperationInfo(OperationKind.AUDIT, Permission.AUDIT,
                                           "audit_verify"),
    Operation.AUDIT_PROVE: _OperationInfo(OperationKind.AUDIT, Permission.AUDIT, "audit_prove"),
}

STORE_OPERATIONS: frozenset[Operation] = frozenset(
    {Operation.INDEX_STATUS, Operation.PROCESS_INDEX_JOBS, Operation.RETRY_INDEX_JOBS,
     Operation.REINDEX, Operation.PURGE_SNAPSHOTS, Operation.PURGE_EXPIRED_ALL,
     Operation.EXTRACTION_STATUS, Operation.LEASE_EXTRACTION_JOBS,
     Operation.SETTLE_EXTRACTION_JOBS, Operation.RETRY_EXTRACTION_JOBS})
"""Operations on the store as a whole (no scope): only an operator runs them."""

MAINTENANCE: frozenset[Operation] = frozenset(
    {Operation.DELETE_ALL, Operation.DELETE_USER, Operation.PURGE_EXPIRED,
     Operation.ERASE_USER_TURNS, Operation.ERASE_USER_BLOCKS}
)
"""Erasure and cleanup. Profiles that forbid ordinary writes (read-only) still allow
these: a legal erasure obligation outranks a configuration choice."""

AUDIT_OPERATIONS: frozenset[Operation] = frozenset(
    {Operation.AUDIT_QUERY, Operation.AUDIT_REPORT, Operation.AUDIT_VERIFY,
     Operation.AUDIT_PROVE})
"""Reading the audit trail, with ``audit:read``: the whole tenant's events, which no
memory permission reaches."""

REVIEW_DECISIONS: frozenset[Operation] = frozenset({Operation.APPROVE, Operation.REJECT})

TIER_OPERATIONS: frozenset[Operation] = frozenset({
    Operation.APPEND_TURN, Operation.RECENT_TURNS, Operation.LIST_TURNS,
    Operation.CLEAR_TURNS, Operation.READ_WORKING_STATE, Operation.UPDATE_WORKING_STATE,
    Operation.CLEAR_WORKING_STATE, Operation.RECORD_CONTEXT, Operation.RECORD_EXTRACTION,
    Operation.RECORD_REMEMBER, Operation.ERASE_USER_TURNS, Operation.READ_BLOCKS,
    Operation.EDIT_BLOCK, Operation.BLOCK_HISTORY, Operation.ERASE_USER_BLOCKS,
})
"""Operations on the conversation, working-state and block tiers and the per-turn
context record; they carry their own request types (``governed_memory.tiers.requests``)."""
