"""The SQLite schema as an ordered list of migrations, applied on start.

:mod:`sqlite.connection` applies them (and registers the SQL functions they call, such
as ``gm_index_text``). Each migration runs once, inside a ``BEGIN IMMEDIATE``
transaction, so two processes starting on one fresh file cannot both apply it. A file
whose schema is newer than this code knows is refused rather than written with stale
assumptions.
"""

from __future__ import annotations

from typing import Final

from governed_memory_native.retrieval import tokens
from governed_memory_native.storage.migrations import Migration

VECTOR_LOG_KEEP: Final = 10_000
"""Changes kept in ``vector_changes`` per (identity, scope): an index further behind than
this rebuilds from the stored vectors instead of catching up."""


_LEXICAL_BACKFILL: Final = (
    # Active records are counted and indexed, with the terms of tokens.index_text (the
    # analyzer every write uses), split and counted here. v9 built the index this way
    # and v13 rebuilt it (new analyzer) into emptied tables.
    """
    INSERT INTO lexical_scopes (scope_hash, documents, total_length)
        SELECT scope_hash, count(*), sum(token_count) FROM memory_records
        WHERE status = 'active' GROUP BY scope_hash ORDER BY scope_hash
    """,
    """
    INSERT INTO lexical_docs (doc, scope_id, length)
        SELECT r.seq, s.scope_id, r.token_count FROM memory_records AS r
        JOIN lexical_scopes AS s ON s.scope_hash = r.scope_hash
        WHERE r.status = 'active'
    """,
    """
    INSERT INTO lexical_postings (scope_id, term, doc, tf, length, visibility,
                                  valid_from, invalid_at)
        WITH RECURSIVE split (doc, rest, word) AS (
            SELECT d.doc, gm_index_text(r.content) || ' ', ''
            FROM lexical_docs AS d JOIN memory_records AS r ON r.seq = d.doc
            UNION ALL
            SELECT doc, substr(rest, instr(rest, ' ') + 1),
                   substr(rest, 1, instr(rest, ' ') - 1)
            FROM split WHERE rest <> ''
        )
        SELECT d.scope_id, w.word, w.doc, count(*), d.length, r.visibility,
               r.valid_from, r.invalid_at
        FROM split AS w JOIN lexical_docs AS d ON d.doc = w.doc
        JOIN memory_records AS r ON r.seq = w.doc
        WHERE w.word <> '' GROUP BY w.doc, w.word
    """,
    """
    INSERT INTO lexical_terms (scope_id, term, documents)
        SELECT scope_id, term, count(*) FROM lexical_postings GROUP BY scope_id, term
    """,
)


def _vector_trigger(name: str, event: str, row: str, count: str, when: str = "") -> str:
    """A trigger on ``memory_vectors`` that bumps the (identity, scope) of ``row`` (``NEW``
    or ``OLD``): seq by one and the vector count by ``count``; logs the record id under
    the new seq; and drops the change that just fell out of the kept tail."""
    key = f"identity = {row}.identity AND scope_hash = {row}.scope_hash"
    start = "1" if count == "+ 1" else "0"
    bump = ("INSERT INTO vector_scopes (identity, scope_hash, seq, vectors)"
            f" VALUES ({row}.identity, {row}.scope_hash, 1, {start})"
            " ON CONFLICT (identity, scope_hash) DO UPDATE SET seq = seq + 1"
            + (f", vectors = vectors {count}" if count else ""))
    return (
        f"CREATE TRIGGER {name} AFTER {event} ON memory_vectors"
        + (f" WHEN {when}" if when else "") + " BEGIN "
        + bump + "; "
        "INSERT INTO vector_changes (identity, scope_hash, seq, record_id)"
        f" SELECT identity, scope_hash, seq, {row}.record_id FROM vector_scopes"
        f" WHERE {key}; "
        f"DELETE FROM vector_changes WHERE {key} AND seq = (SELECT seq FROM vector_scopes"
        f" WHERE {key}) - {VECTOR_LOG_KEEP:d}; "
        "END"
    )


def _revision_trigger(name: str, table: str, event: str) -> str:
    """Advance the revision of the scope a row of ``table`` belongs to (the old row's on
    a delete, the new one's otherwise; no statement moves a row to another scope)."""
    row = "OLD" if event == "DELETE" else "NEW"
    return (f"CREATE TRIGGER {name} AFTER {event} ON {table} BEGIN"
            " INSERT INTO scope_revisions (name, revision)"
            f" VALUES ({row}.scope_hash, 1)"
            " ON CONFLICT (name) DO UPDATE SET revision = revision + 1; END")


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        version=1,
        description="records, versions, idempotency entries and the FTS5 lexical index",
        statements=(
            """
            CREATE TABLE memory_records (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                scope_hash TEXT NOT NULL,
                tenant_id TEXT NOT NULL,
                user_id TEXT,
                scope TEXT NOT NULL,
                record_key TEXT,
                content TEXT NOT NULL,
                memory_type TEXT NOT NULL,
                status TEXT NOT NULL,
                version INTEGER NOT NULL,
                revision TEXT NOT NULL,
                content_hash TEXT NOT NULL,
                metadata TEXT NOT NULL,
                provenance TEXT NOT NULL,
                visibility TEXT NOT NULL,
                importance REAL NOT NULL,
                entity_ids TEXT NOT NULL,
                valid_from REAL,
                invalid_at REAL,
                supersedes TEXT,
                superseded_by TEXT,
                expires_at REAL,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                index_state TEXT NOT NULL
            )
            """,
            """
            CREATE UNIQUE INDEX memory_records_live_key
                ON memory_records (scope_hash, record_key)
                WHERE record_key IS NOT NULL AND status <> 'deleted'
            """,
            "CREATE INDEX memory_records_scope_id ON memory_records (scope_hash, id)",
            "CREATE INDEX memory_records_user ON memory_records (tenant_id, user_id, id)",
            """
            CREATE TABLE memory_versions (
                record_id TEXT NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
                version INTEGER NOT NULL,
                operation TEXT NOT NULL,
                recorded_at REAL NOT NULL,
                operation_id TEXT,
                snapshot TEXT NOT NULL,
                PRIMARY KEY (record_id, version)
            ) WITHOUT ROWID
            """,
            """
            CREATE TABLE memory_idempotency (
                scope_hash TEXT NOT NULL,
                operation TEXT NOT NULL,
                idem_key TEXT NOT NULL,
                fingerprint TEXT NOT NULL,
                record_id TEXT NOT NULL,
                tenant_id TEXT NOT NULL,
                user_id TEXT,
                version INTEGER,
                revision TEXT,
                hard INTEGER NOT NULL,
                created_at REAL NOT NULL,
                PRIMARY KEY (scope_hash, operation, idem_key)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX memory_idempotency_record ON memory_idempotency (record_id)",
            "CREATE INDEX memory_idempotency_user ON memory_idempotency (tenant_id, user_id)",
            # A plain (content-storing) FTS5 table keyed by memory_records.seq: deleting a
            # row needs only its rowid, so the index can never drift from a stale copy.
            """
            CREATE VIRTUAL TABLE memory_fts USING fts5 (
                content, tokenize = 'unicode61 remove_diacritics 2'
            )
            """,
        ),
    ),
    Migration(
        version=2,
        description="idempotency tombstones: entries of a hard-deleted record are kept, erased",
        statements=(
            "ALTER TABLE memory_idempotency ADD COLUMN erased INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    Migration(
        version=3,
        description="the FTS5 index holds the shared tokenizer's words (ascii tokenizer)",
        statements=(
            # unicode61 over raw content tokenized differently from queries; the index
            # now stores tokens.index_text(content), which 'ascii' splits on spaces only.
            "DROP TABLE memory_fts",
            "CREATE VIRTUAL TABLE memory_fts USING fts5 (content, tokenize = 'ascii')",
            """
            INSERT INTO memory_fts (rowid, content)
                SELECT seq, gm_index_text(content) FROM memory_records
                WHERE status <> 'deleted'
            """,
        ),
    ),
    Migration(
        version=4,
        description="BM25 statistics from the searched scopes only: token counts, term view",
        statements=(
            # Search scores with N, mean length and document frequencies of the requested
            # scopes' visible records, never FTS5's table-wide ones (those would let one
            # tenant observe another's term frequencies through its own scores).
            "ALTER TABLE memory_records ADD COLUMN token_count INTEGER NOT NULL DEFAULT 0",
            "UPDATE memory_records SET token_count = gm_word_count(content)",
            # Covers the corpus statistics (count and total length of visible records).
            """
            CREATE INDEX memory_records_corpus
                ON memory_records (scope_hash, status, expires_at, token_count)
            """,
            # One row per occurrence of a term in a document: the postings of the query
            # terms, joined with memory_records for every filter, give df and tf.
            "CREATE VIRTUAL TABLE memory_fts_terms USING fts5vocab (memory_fts, 'instance')",
        ),
    ),
    Migration(
        version=5,
        description="the event outbox: each write's committed event, stored in its transaction",
        statements=(
            # seq orders events as they were committed (writers are serialized); the
            # body is the event's JSON, which by contract carries no content.
            """
            CREATE TABLE event_outbox (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                event_id TEXT NOT NULL UNIQUE,
                tenant_id TEXT NOT NULL,
                body TEXT NOT NULL
            )
            """,
        ),
    ),
    Migration(
        version=6,
        description="vectors with their embedder identity, the indexing outbox, retrieval "
                    "snapshots",
        statements=(
            # One vector per record and embedder identity: a finished job upserts, so a
            # job done twice (an expired lease) never leaves two vectors.
            """
            CREATE TABLE memory_vectors (
                record_id TEXT NOT NULL REFERENCES memory_records (id) ON DELETE CASCADE,
                identity TEXT NOT NULL,
                embedder_id TEXT NOT NULL,
                model_revision TEXT NOT NULL,
                dimension INTEGER NOT NULL,
                scope_hash TEXT NOT NULL,
                version INTEGER NOT NULL,
                content_hash TEXT NOT NULL,
                vector BLOB NOT NULL,
                created_at REAL NOT NULL,
                PRIMARY KEY (record_id, identity)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX memory_vectors_identity ON memory_vectors (identity, scope_hash)",
            """
            CREATE TABLE index_jobs (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                job_id TEXT NOT NULL UNIQUE,
                record_id TEXT NOT NULL,
                scope_hash TEXT NOT NULL,
                version INTEGER NOT NULL,
                action TEXT NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL,
                next_attempt_at REAL NOT NULL,
                created_at REAL NOT NULL,
                lease_owner TEXT,
                lease_expires_at REAL,
                last_error_code TEXT
            )
            """,
            "CREATE INDEX index_jobs_due ON index_jobs (state, next_attempt_at)",
            "CREATE INDEX index_jobs_record ON index_jobs (record_id)",
            """
            CREATE TABLE retrieval_snapshots (
                snapshot_id TEXT PRIMARY KEY,
                tenant_id TEXT NOT NULL,
                body TEXT NOT NULL
            ) WITHOUT ROWID
            """,
        ),
    ),
    Migration(
        version=7,
        description="retrieval snapshots: age (for retention) and the users they name "
                    "(for erasure)",
        statements=(
            "ALTER TABLE retrieval_snapshots ADD COLUMN created_at REAL NOT NULL DEFAULT 0",
            "CREATE INDEX retrieval_snapshots_age ON retrieval_snapshots (created_at)",
            """
            CREATE TABLE retrieval_snapshot_subjects (
                tenant_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                snapshot_id TEXT NOT NULL,
                PRIMARY KEY (tenant_id, user_id, snapshot_id)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX retrieval_snapshot_subjects_snapshot"
            " ON retrieval_snapshot_subjects (snapshot_id)",
        ),
    ),
    Migration(
        version=8,
        description="erasure progress: what the committed batches of an unfinished "
                    "delete_user removed",
        statements=(
            """
            CREATE TABLE erasure_progress (
                tenant_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                records INTEGER NOT NULL,
                versions INTEGER NOT NULL,
                index_entries INTEGER NOT NULL,
                idempotency_entries INTEGER NOT NULL,
                scope_hashes TEXT NOT NULL,
                started_at REAL NOT NULL,
                PRIMARY KEY (tenant_id, user_id)
            ) WITHOUT ROWID
            """,
        ),
    ),
    Migration(
        version=9,
        description="scope-local lexical index: per-scope statistics, terms and postings "
                    "of active records, kept on write; the FTS5 index is dropped",
        statements=(
            # A scope's statistics are kept with its postings on every write, so a search
            # reads a few rows per (scope, term) through the keys below instead of
            # counting the corpus (linear in the whole file with FTS5's global vocab
            # table), and never reads or counts a record of another scope (see bm25 and
            # lexical_topk). The integer scope_id keeps the scope hash out of postings.
            """
            CREATE TABLE lexical_scopes (
                scope_id INTEGER PRIMARY KEY,
                scope_hash TEXT NOT NULL UNIQUE,
                documents INTEGER NOT NULL,
                total_length INTEGER NOT NULL
            )
            """,
            # One row per counted (active) record: which scope counts it and its length.
            """
            CREATE TABLE lexical_docs (
                doc INTEGER PRIMARY KEY,
                scope_id INTEGER NOT NULL,
                length INTEGER NOT NULL
            )
            """,
            # Document frequency of each word in each scope; a word no record of the
            # scope has any more has no row (erasure leaves no word behind).
            """
            CREATE TABLE lexical_terms (
                scope_id INTEGER NOT NULL,
                term TEXT NOT NULL,
                documents INTEGER NOT NULL,
                PRIMARY KEY (scope_id, term)
            ) WITHOUT ROWID
            """,
            # The postings of a word in a scope are one B-tree range. Validity and
            # visibility are copied in (every write of a record rewrites its postings):
            # the filters every search applies need no lookup in memory_records.
            """
            CREATE TABLE lexical_postings (
                scope_id INTEGER NOT NULL,
                term TEXT NOT NULL,
                doc INTEGER NOT NULL,
                tf INTEGER NOT NULL,
                length INTEGER NOT NULL,
                visibility TEXT NOT NULL,
                valid_from REAL,
                invalid_at REAL,
                PRIMARY KEY (scope_id, term, doc)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX lexical_postings_doc ON lexical_postings (doc)",
            *_LEXICAL_BACKFILL,
            # No FTS5 any more: erasure no longer rewrites a global index ('optimize').
            "DROP TABLE memory_fts_terms",
            "DROP TABLE memory_fts",
        ),
    ),
    Migration(
        version=10,
        description="the vector change log: a sequence and a bounded log of changed record "
                    "ids per (embedder identity, scope), kept by triggers",
        statements=(
            # An in-process vector index of a scope reads its row here on every search:
            # the same seq means nothing changed since it caught up (one key read); a
            # larger one names the changes to read from vector_changes. Kept by triggers
            # on memory_vectors, so every statement that stores, replaces or removes a
            # vector (erasure and foreign-key cascades included), in any process, bumps
            # it in its own transaction: the single writer makes seq commit-ordered.
            """
            CREATE TABLE vector_scopes (
                identity TEXT NOT NULL,
                scope_hash TEXT NOT NULL,
                seq INTEGER NOT NULL,
                vectors INTEGER NOT NULL,
                PRIMARY KEY (identity, scope_hash)
            ) WITHOUT ROWID
            """,
            # Record ids only, never a vector or any content; the last VECTOR_LOG_KEEP
            # changes of each scope are kept (an index further behind rebuilds).
            """
            CREATE TABLE vector_changes (
                identity TEXT NOT NULL,
                scope_hash TEXT NOT NULL,
                seq INTEGER NOT NULL,
                record_id TEXT NOT NULL,
                PRIMARY KEY (identity, scope_hash, seq)
            ) WITHOUT ROWID
            """,
            """
            INSERT INTO vector_scopes (identity, scope_hash, seq, vectors)
                SELECT identity, scope_hash, 0, count(*) FROM memory_vectors
                GROUP BY identity, scope_hash
            """,
            _vector_trigger("vector_stored", "INSERT", "NEW", "+ 1"),
            _vector_trigger("vector_removed", "DELETE", "OLD", "- 1"),
            _vector_trigger("vector_replaced", "UPDATE", "NEW", "",
                            when="OLD.identity = NEW.identity"
                                 " AND OLD.scope_hash = NEW.scope_hash"),
            # An update that moved a vector to another identity or scope (no statement
            # does today) counts as a removal there and a new vector here.
            _vector_trigger("vector_moved_out", "UPDATE", "OLD", "- 1",
                            when="OLD.identity <> NEW.identity"
                                 " OR OLD.scope_hash <> NEW.scope_hash"),
            _vector_trigger("vector_moved_in", "UPDATE", "NEW", "+ 1",
                            when="OLD.identity <> NEW.identity"
                                 " OR OLD.scope_hash <> NEW.scope_hash"),
        ),
    ),
    Migration(
        version=11,
        description="the lexical delta: new postings and tombstones per scope, merged into "
                    "the scope-local index in batches; the expiry index skips active "
                    "records that never expire",
        statements=(
            # How many rows the scope has in lexical_delta and lexical_tombstones together:
            # a write reads it from the scope row it updates anyway, so deciding between
            # the delta and the main postings costs no extra page (see sqlite_transaction).
            "ALTER TABLE lexical_scopes ADD COLUMN pending INTEGER NOT NULL DEFAULT 0",
            # One row per record whose postings have not been merged yet: its words and
            # their frequencies as one compact JSON object ({"tea":2,"green":1}), with the
            # copies of validity and visibility the postings carry. A write appends one
            # row at the end of its scope's range (one page) where the main index takes
            # a row on a different page for every word.
            """
            CREATE TABLE lexical_delta (
                scope_id INTEGER NOT NULL,
                doc INTEGER NOT NULL,
                length INTEGER NOT NULL,
                terms TEXT NOT NULL,
                visibility TEXT NOT NULL,
                valid_from REAL,
                invalid_at REAL,
                PRIMARY KEY (scope_id, doc)
            ) WITHOUT ROWID
            """,
            # A merged record taken out of the index without being erased (an update, a
            # soft delete): its postings in lexical_postings no longer count. No words
            # here; they are read from the postings through the doc index when needed.
            """
            CREATE TABLE lexical_tombstones (
                scope_id INTEGER NOT NULL,
                doc INTEGER NOT NULL,
                PRIMARY KEY (scope_id, doc)
            ) WITHOUT ROWID
            """,
            # Read by the expired-records part of a search's statistics (expires_at <= now
            # implies the WHERE below) and by the live-record count (records outside it
            # are live: active, never expiring), so the common record, active and never
            # expiring, writes no entry on insert or update.
            "DROP INDEX memory_records_corpus",
            """
            CREATE INDEX memory_records_corpus
                ON memory_records (scope_hash, status, expires_at, token_count)
                WHERE expires_at IS NOT NULL OR status <> 'active'
            """,
        ),
    ),
    Migration(
        version=12,
        description="event time: when what a record tells happened (occurred_at)",
        statements=(
            # NULL for every stored record (nobody said when it happened): its event time
            # is its created_at, read through coalesce. Event-time filters join the
            # records row the way type and metadata filters do, so the postings carry
            # no copy and need no rebuild.
            "ALTER TABLE memory_records ADD COLUMN occurred_at REAL",
        ),
    ),
    Migration(
        version=13,
        description="the lexical index rebuilt with the stemming analyzer: "
                    + tokens.ANALYZER,
        statements=(
            # Stored terms are the old analyzer's words (no possessive rule, no stems),
            # which a query's stems would no longer meet: every lexical table is rebuilt
            # from the records, as v9 first built it, with gm_index_text and
            # gm_word_count (tokens.index_text and tokens.word_count, registered on the
            # connection). The delta and tombstones are folded in by being rebuilt away.
            "UPDATE memory_records SET token_count = gm_word_count(content)",
            "DELETE FROM lexical_delta",
            "DELETE FROM lexical_tombstones",
            "DELETE FROM lexical_postings",
            "DELETE FROM lexical_terms",
            "DELETE FROM lexical_docs",
            "DELETE FROM lexical_scopes",
            *_LEXICAL_BACKFILL,
        ),
    ),
    Migration(
        version=14,
        description="scope revisions: a revision per scope advanced by triggers in the "
                    "transaction of every change to its records or vectors, and a "
                    "per-tenant epoch; partial indexes for the instants that end a page",
        statements=(
            # Read by every process's search cache before it serves a page (one point
            # read): a write or an erasure in any process invalidates every process's
            # cached pages at commit. ``name`` is a scope hash or ``epoch:<tenant>``.
            # No backfill: no page was ever stored under a revision read here, and a
            # scope without a row reads 0 until its first change.
            """
            CREATE TABLE scope_revisions (
                name TEXT PRIMARY KEY,
                revision INTEGER NOT NULL
            ) WITHOUT ROWID
            """,
            *(_revision_trigger(f"scope_revision_{table}_{event.lower()}", table, event)
              for table in ("memory_records", "memory_vectors")
              for event in ("INSERT", "UPDATE", "DELETE")),
            # A page ends at the first instant a record of its scopes expires or becomes
            # valid or invalid; each is the first entry of one of these (records that
            # never expire and are always valid write no entry).
            *(f"CREATE INDEX memory_records_{column} ON memory_records (scope_hash, {column})"
              f" WHERE {column} IS NOT NULL"
              for column in ("expires_at", "valid_from", "invalid_at")),
        ),
    ),
    Migration(
        version=15,
        description="the expiry index of every scope: the maintenance round purges "
                    "expired records store-wide, earliest expiry first",
        statements=(
            # memory_records_expires_at leads with the scope; the store-wide purge reads
            # the earliest expiries of every scope, so it needs expiry first. Partial:
            # records that never expire write no entry. A plain index on existing rows:
            # nothing is rewritten, and the migration's BEGIN IMMEDIATE keeps writers out.
            "CREATE INDEX memory_records_expiry ON memory_records (expires_at, id)"
            " WHERE expires_at IS NOT NULL",
        ),
    ),
)

LATEST_VERSION: Final = MIGRATIONS[-1].version
