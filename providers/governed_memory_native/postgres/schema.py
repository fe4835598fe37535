"""The PostgreSQL schema as an ordered list of migrations, applied on start.

The list says what each version changes; :mod:`postgres.migrating` applies it (in one
transaction under the schema's advisory lock, :mod:`postgres.locks`) and :func:`migrate`
binds the two. The list is read when :func:`migrate` runs, not when it is imported, so a
test can start a store at an older version by shortening :data:`MIGRATIONS`. The names
that moved to those modules are still importable from here.

The numbering is PostgreSQL's own (it started with everything SQLite reached by its v4);
each later SQLite migration gets its PostgreSQL counterpart here.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg import AsyncConnection

from governed_memory_native.postgres.locks import tenant_lock_key as tenant_lock_key
from governed_memory_native.postgres.locks import writer_lock_key as writer_lock_key
from governed_memory_native.postgres.migrating import MIGRATIONS_TABLE as MIGRATIONS_TABLE
from governed_memory_native.postgres.migrating import apply_migrations
from governed_memory_native.postgres.migrating import current_version as current_version
from governed_memory_native.postgres.trail import schema as trail_schema
from governed_memory_native.retrieval import tokens
from governed_memory_native.sqlite.schema import VECTOR_LOG_KEEP
from governed_memory_native.storage.migrations import Migration


def _vector_bump(row: str, delta: int) -> str:
    """One change of the vector stored under ``row`` (``NEW`` or ``OLD``), as PL/pgSQL:
    its (identity, scope)'s seq grows by one and its count by ``delta``, the record id
    is logged under the new seq, and the change that just fell out of the kept tail is
    dropped.

    The upsert takes the ``vector_scopes`` row's lock and keeps it to COMMIT, so the
    next change of that scope (any process) waits for this transaction to end: seq is
    then in commit order with no gap, and a snapshot that sees a seq sees every change
    up to it and none after. The new seq goes through a variable, so each statement is
    a primary-key lookup (one statement joining the upsert's RETURNING to the log was
    planned as a scan of the whole log: a millisecond per row at 10,000 changes), and a
    scope with fewer changes than the log keeps has none to drop.
    """
    start = 0 if delta < 0 else 1  # the count if the scope had no row (never, after
    # the backfill: every stored vector is counted)
    return (
        "INSERT INTO vector_scopes AS s (identity, scope_hash, seq, vectors)"
        f" VALUES ({row}.identity, {row}.scope_hash, 1, {start})"
        " ON CONFLICT (identity, scope_hash) DO UPDATE"
        f" SET seq = s.seq + 1, vectors = s.vectors + ({delta:d}) RETURNING s.seq INTO n;"
        " INSERT INTO vector_changes (identity, scope_hash, seq, record_id)"
        f" VALUES ({row}.identity, {row}.scope_hash, n, {row}.record_id);"
        f" IF n > {VECTOR_LOG_KEEP:d} THEN DELETE FROM vector_changes"
        f" WHERE identity = {row}.identity AND scope_hash = {row}.scope_hash"
        f" AND seq = n - {VECTOR_LOG_KEEP:d}; END IF;"
    )


_VECTOR_TRIGGER_FUNCTION: Final = (
    # SET search_path FROM CURRENT: the function's tables are this schema's (migrate
    # sets it), whatever the session that fires the trigger has as its search_path.
    "CREATE FUNCTION vector_changed() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $body$ DECLARE n bigint; BEGIN"
    " IF TG_OP = 'INSERT' THEN " + _vector_bump("NEW", 1) +
    " ELSIF OLD.identity = NEW.identity AND OLD.scope_hash = NEW.scope_hash THEN "
    + _vector_bump("NEW", 0) +
    # An update that moved a vector to another identity or scope (no statement does
    # today) counts as a removal there and a new vector here.
    " ELSE " + _vector_bump("OLD", -1) + " " + _vector_bump("NEW", 1) +
    " END IF; RETURN NULL; END $body$"
)
"""Row by row for stores and replacements: a write stores one vector per statement."""

_VECTORS_REMOVED_FUNCTION: Final = (
    "CREATE FUNCTION vectors_removed() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $body$ DECLARE k record; top bigint; BEGIN"
    " FOR k IN SELECT identity, scope_hash, count(*) AS n FROM gone"
    " GROUP BY identity, scope_hash ORDER BY identity, scope_hash LOOP"
    " INSERT INTO vector_scopes AS s (identity, scope_hash, seq, vectors)"
    " VALUES (k.identity, k.scope_hash, k.n, 0) ON CONFLICT (identity, scope_hash)"
    " DO UPDATE SET seq = s.seq + k.n, vectors = s.vectors - k.n RETURNING s.seq INTO top;"
    " INSERT INTO vector_changes (identity, scope_hash, seq, record_id)"
    " SELECT k.identity, k.scope_hash, top - k.n + row_number() OVER (ORDER BY record_id),"
    " record_id FROM gone WHERE identity = k.identity AND scope_hash = k.scope_hash;"
    f" IF top > {VECTOR_LOG_KEEP:d} THEN DELETE FROM vector_changes"
    " WHERE identity = k.identity AND scope_hash = k.scope_hash"
    f" AND seq > top - k.n - {VECTOR_LOG_KEEP:d} AND seq <= top - {VECTOR_LOG_KEEP:d};"
    " END IF; END LOOP; RETURN NULL; END $body$"
)
"""Once per statement for removals, over the statement's removed rows (``gone``): an
erasure removes a thousand vectors per statement, and foreign-key cascades of one
statement arrive together too. Each scope's row is then bumped once per statement by
the number removed, and the removed ids logged under the seqs in between. Bumping one
row once per vector made a ``delete_all`` of 10,000 vectors (one transaction) 2.4 times
slower: every update of a row adds a version that later updates of the same row in the
same transaction walk past."""


_REVISIONS_FUNCTION: Final = (
    "CREATE FUNCTION scope_revisions_advance() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $body$ BEGIN"
    " INSERT INTO scope_revisions AS s (name, revision)"
    " SELECT DISTINCT scope_hash, 1 FROM changed ORDER BY 1"
    " ON CONFLICT (name) DO UPDATE SET revision = s.revision + 1;"
    " RETURN NULL; END $body$"
)
"""Once per statement, over the scopes of the rows it changed (``changed``): each scope
advances once per statement, however many of its rows the statement touched (an
erasure of a thousand records, a cascade), in scope order."""


CAS_GUARD_VERSION: Final = 12
"""From this version on the schema has ``compare_and_set_applied``: a compare-and-set
may then be queued (see ``postgres_statements.PostgresRecords.replace``)."""

_CAS_FUNCTION: Final = (
    "CREATE FUNCTION compare_and_set_applied(changed bigint) RETURNS bigint"
    " LANGUAGE plpgsql AS $body$ BEGIN"
    " IF changed <> 1 THEN RAISE EXCEPTION USING ERRCODE = 'GM409',"
    " MESSAGE = 'compare-and-set: the record is no longer at the expected revision';"
    " END IF; RETURN changed; END $body$"
)
"""Raises SQLSTATE ``GM409`` (``postgres_errors.STALE_REVISION``, a conflict) unless
the compare-and-set it is given the row count of changed exactly one row."""


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        version=1,
        description="records, versions, idempotency entries and the term postings",
        statements=(
            # COLLATE "C" on every compared identifier: ids order by bytes, as in Python
            # and SQLite, whatever the database's default collation is.
            """
            CREATE TABLE memory_records (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                id text COLLATE "C" NOT NULL UNIQUE,
                scope_hash text COLLATE "C" NOT NULL,
                tenant_id text COLLATE "C" NOT NULL,
                user_id text COLLATE "C",
                scope text NOT NULL,
                record_key bytea,
                content bytea NOT NULL,
                memory_type text NOT NULL,
                status text NOT NULL,
                version integer NOT NULL,
                revision text NOT NULL,
                content_hash text NOT NULL,
                metadata text NOT NULL,
                provenance text NOT NULL,
                visibility text NOT NULL,
                importance double precision NOT NULL,
                entity_ids text NOT NULL,
                valid_from double precision,
                invalid_at double precision,
                supersedes text,
                superseded_by text,
                expires_at double precision,
                created_at double precision NOT NULL,
                updated_at double precision NOT NULL,
                index_state text NOT NULL,
                token_count integer NOT NULL
            )
            """,
            """
            CREATE UNIQUE INDEX memory_records_live_key
                ON memory_records (scope_hash, record_key)
                WHERE record_key IS NOT NULL AND status <> 'deleted'
            """,
            "CREATE INDEX memory_records_scope_id ON memory_records (scope_hash, id)",
            "CREATE INDEX memory_records_user ON memory_records (tenant_id, user_id, id)",
            # The corpus statistics of a search (count and total length of the visible
            # records of the searched scopes) come from this index alone.
            """
            CREATE INDEX memory_records_corpus
                ON memory_records (scope_hash, status, expires_at) INCLUDE (token_count)
            """,
            """
            CREATE TABLE memory_versions (
                record_id text COLLATE "C" NOT NULL
                    REFERENCES memory_records (id) ON DELETE CASCADE,
                version integer NOT NULL,
                operation text NOT NULL,
                recorded_at double precision NOT NULL,
                operation_id bytea,
                snapshot text NOT NULL,
                PRIMARY KEY (record_id, version)
            )
            """,
            """
            CREATE TABLE memory_idempotency (
                scope_hash text COLLATE "C" NOT NULL,
                operation text COLLATE "C" NOT NULL,
                idem_key bytea NOT NULL,
                fingerprint text NOT NULL,
                record_id text COLLATE "C" NOT NULL,
                tenant_id text COLLATE "C" NOT NULL,
                user_id text COLLATE "C",
                version integer,
                revision text,
                hard boolean NOT NULL,
                erased boolean NOT NULL DEFAULT false,
                created_at double precision NOT NULL,
                PRIMARY KEY (scope_hash, operation, idem_key)
            )
            """,
            "CREATE INDEX memory_idempotency_record ON memory_idempotency (record_id)",
            "CREATE INDEX memory_idempotency_user ON memory_idempotency (tenant_id, user_id)",
            # The lexical index: one row per (term, document) with the term's frequency,
            # words from the shared tokenizer (tokens.words), so every backend indexes the
            # same terms. The key is the inverted index, and it leads with (term, scope):
            # the postings of a query term in the searched scopes are one B-tree range
            # each, however much other scopes and tenants hold. The document's length,
            # status and expiry are copied in (every write of a record rewrites its
            # postings, so they cannot drift), so a search without type, entity or
            # metadata filters never touches memory_records for its postings.
            """
            CREATE TABLE memory_postings (
                term text COLLATE "C" NOT NULL,
                scope_hash text COLLATE "C" NOT NULL,
                seq bigint NOT NULL REFERENCES memory_records (seq) ON DELETE CASCADE,
                tf integer NOT NULL,
                len integer NOT NULL,
                status text NOT NULL,
                expires_at double precision,
                PRIMARY KEY (term, scope_hash, seq) INCLUDE (tf, len, status, expires_at)
            )
            """,
            "CREATE INDEX memory_postings_seq ON memory_postings (seq)",
        ),
    ),
    Migration(
        version=2,
        description="the event outbox: each write's committed event, stored in its transaction",
        statements=(
            # seq orders events as they were committed: writers hold the writer lock
            # from before the sequence is drawn until after COMMIT. The body is the
            # event's JSON, which by contract carries no content.
            """
            CREATE TABLE event_outbox (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                event_id text COLLATE "C" NOT NULL UNIQUE,
                tenant_id text COLLATE "C" NOT NULL,
                body text NOT NULL
            )
            """,
        ),
    ),
    Migration(
        version=3,
        description="vectors with their embedder identity, the indexing outbox, retrieval "
                    "snapshots; postings carry visibility and validity",
        statements=(
            # One vector per record and embedder identity: a finished job upserts, so a
            # job done twice (an expired lease) never leaves two vectors. float32 values
            # as bytea: there is no pgvector here, so similarity is exact, in Python.
            """
            CREATE TABLE memory_vectors (
                record_id text COLLATE "C" NOT NULL
                    REFERENCES memory_records (id) ON DELETE CASCADE,
                identity text COLLATE "C" NOT NULL,
                embedder_id text NOT NULL,
                model_revision text NOT NULL,
                dimension integer NOT NULL,
                scope_hash text COLLATE "C" NOT NULL,
                version integer NOT NULL,
                content_hash text NOT NULL,
                vector bytea NOT NULL,
                created_at double precision NOT NULL,
                PRIMARY KEY (record_id, identity)
            )
            """,
            "CREATE INDEX memory_vectors_identity ON memory_vectors (identity, scope_hash)",
            # Workers lease due jobs with FOR UPDATE SKIP LOCKED; seq orders them by age.
            """
            CREATE TABLE index_jobs (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                job_id text COLLATE "C" NOT NULL UNIQUE,
                record_id text COLLATE "C" NOT NULL,
                scope_hash text COLLATE "C" NOT NULL,
                version integer NOT NULL,
                action text NOT NULL,
                state text NOT NULL,
                attempts integer NOT NULL,
                next_attempt_at double precision NOT NULL,
                created_at double precision NOT NULL,
                lease_owner text,
                lease_expires_at double precision,
                last_error_code text
            )
            """,
            "CREATE INDEX index_jobs_due ON index_jobs (state, next_attempt_at)",
            "CREATE INDEX index_jobs_record ON index_jobs (record_id)",
            """
            CREATE TABLE retrieval_snapshots (
                snapshot_id text COLLATE "C" PRIMARY KEY,
                tenant_id text COLLATE "C" NOT NULL,
                body text NOT NULL
            )
            """,
            # Validity and visibility became hard filters of a search: copy them into the
            # postings (rewritten with every write of a record, like status and expiry),
            # so filtering on them needs no join with memory_records either.
            """
            ALTER TABLE memory_postings ADD COLUMN visibility text,
                ADD COLUMN valid_from double precision, ADD COLUMN invalid_at double precision
            """,
            """
            UPDATE memory_postings AS p SET visibility = r.visibility,
                valid_from = r.valid_from, invalid_at = r.invalid_at
            FROM memory_records AS r WHERE r.seq = p.seq
            """,
            "ALTER TABLE memory_postings ALTER COLUMN visibility SET NOT NULL",
            """
            ALTER TABLE memory_postings DROP CONSTRAINT memory_postings_pkey,
                ADD PRIMARY KEY (term, scope_hash, seq)
                INCLUDE (tf, len, status, expires_at, visibility, valid_from, invalid_at)
            """,
        ),
    ),
    Migration(
        version=4,
        description="retrieval snapshots: age (for retention) and the users they name "
                    "(for erasure)",
        statements=(
            "ALTER TABLE retrieval_snapshots"
            " ADD COLUMN created_at double precision NOT NULL DEFAULT 0",
            "CREATE INDEX retrieval_snapshots_age ON retrieval_snapshots (created_at)",
            """
            CREATE TABLE retrieval_snapshot_subjects (
                tenant_id text COLLATE "C" NOT NULL,
                user_id text COLLATE "C" NOT NULL,
                snapshot_id text COLLATE "C" NOT NULL,
                PRIMARY KEY (tenant_id, user_id, snapshot_id)
            )
            """,
            "CREATE INDEX retrieval_snapshot_subjects_snapshot"
            " ON retrieval_snapshot_subjects (snapshot_id)",
        ),
    ),
    Migration(
        version=5,
        description="erasure progress: what the committed batches of an unfinished "
                    "delete_user removed",
        statements=(
            """
            CREATE TABLE erasure_progress (
                tenant_id text COLLATE "C" NOT NULL,
                user_id text COLLATE "C" NOT NULL,
                records bigint NOT NULL,
                versions bigint NOT NULL,
                index_entries bigint NOT NULL,
                idempotency_entries bigint NOT NULL,
                scope_hashes text[] NOT NULL,
                started_at double precision NOT NULL,
                PRIMARY KEY (tenant_id, user_id)
            )
            """,
        ),
    ),
    Migration(
        version=6,
        description="scope-local lexical index: per-scope statistics, terms and postings "
                    "of active records, kept on write (replaces memory_postings)",
        statements=(
            # A scope's statistics are kept with its postings on every write, so a search
            # reads a few rows per (scope, term) instead of counting the corpus, and never
            # reads or counts a record of another scope (see bm25 and lexical_topk). The
            # integer scope_id keeps the 64-character scope hash out of every posting.
            """
            CREATE TABLE lexical_scopes (
                scope_id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                scope_hash text COLLATE "C" NOT NULL UNIQUE,
                documents bigint NOT NULL,
                total_length bigint NOT NULL
            )
            """,
            # One row per counted (active) record: which scope counts it and its length.
            """
            CREATE TABLE lexical_docs (
                doc bigint PRIMARY KEY,
                scope_id integer NOT NULL,
                length integer NOT NULL
            )
            """,
            # Document frequency of each word in each scope; a word no record of the
            # scope has any more has no row (erasure leaves no word behind).
            """
            CREATE TABLE lexical_terms (
                scope_id integer NOT NULL,
                term text COLLATE "C" NOT NULL,
                documents integer NOT NULL,
                PRIMARY KEY (scope_id, term)
            )
            """,
            # The postings of a word in a scope are one B-tree range; validity and
            # visibility are copied in (every write of a record rewrites its postings) so
            # the filters every search applies need no join with memory_records.
            """
            CREATE TABLE lexical_postings (
                scope_id integer NOT NULL,
                term text COLLATE "C" NOT NULL,
                doc bigint NOT NULL,
                tf integer NOT NULL,
                length integer NOT NULL,
                visibility text NOT NULL,
                valid_from double precision,
                invalid_at double precision,
                PRIMARY KEY (scope_id, term, doc)
                    INCLUDE (tf, length, visibility, valid_from, invalid_at)
            )
            """,
            "CREATE INDEX lexical_postings_doc ON lexical_postings (doc)",
            # Backfill from the records and the old postings (the same tokenizer wrote
            # them): only active records are counted and indexed.
            """
            INSERT INTO lexical_scopes (scope_hash, documents, total_length)
                SELECT scope_hash, count(*), sum(token_count) FROM memory_records
                WHERE status = 'active' GROUP BY scope_hash ORDER BY scope_hash
            """,
            """
            INSERT INTO lexical_docs (doc, scope_id, length)
                SELECT r.seq, s.scope_id, r.token_count FROM memory_records AS r
                JOIN lexical_scopes AS s USING (scope_hash) WHERE r.status = 'active'
            """,
            """
            INSERT INTO lexical_postings (scope_id, term, doc, tf, length, visibility,
                                          valid_from, invalid_at)
                SELECT s.scope_id, p.term, p.seq, p.tf, p.len, r.visibility, r.valid_from,
                       r.invalid_at
                FROM memory_postings AS p JOIN memory_records AS r ON r.seq = p.seq
                JOIN lexical_scopes AS s ON s.scope_hash = r.scope_hash
                WHERE r.status = 'active'
            """,
            """
            INSERT INTO lexical_terms (scope_id, term, documents)
                SELECT scope_id, term, count(*) FROM lexical_postings GROUP BY scope_id, term
            """,
            "DROP TABLE memory_postings",
        ),
    ),
    Migration(
        version=7,
        description="the vector change log: a sequence and a bounded log of changed record "
                    "ids per (embedder identity, scope), kept by triggers",
        statements=(
            # An in-process vector index of a scope reads its row here on every search:
            # the same seq means nothing changed since it caught up; a larger one names
            # the changes to read from vector_changes (see vector_index). Kept by
            # triggers on memory_vectors, so every statement that stores, replaces or
            # removes a vector (erasure and foreign-key cascades included), in any
            # process, bumps it in its own transaction. The row lock the bump takes is
            # no new wait: a scope belongs to one tenant, whose writers are serialised
            # already, and a unit that may touch any tenant runs alone.
            """
            CREATE TABLE vector_scopes (
                identity text COLLATE "C" NOT NULL,
                scope_hash text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                vectors bigint NOT NULL,
                PRIMARY KEY (identity, scope_hash)
            )
            """,
            # Record ids only, never a vector or any content; the last VECTOR_LOG_KEEP
            # changes of each scope are kept (an index further behind rebuilds).
            """
            CREATE TABLE vector_changes (
                identity text COLLATE "C" NOT NULL,
                scope_hash text COLLATE "C" NOT NULL,
                seq bigint NOT NULL,
                record_id text COLLATE "C" NOT NULL,
                PRIMARY KEY (identity, scope_hash, seq)
            )
            """,
            # Under the migration's exclusive schema lock: no writer runs meanwhile, so
            # the counts are exact when the trigger takes over.
            """
            INSERT INTO vector_scopes (identity, scope_hash, seq, vectors)
                SELECT identity, scope_hash, 0, count(*) FROM memory_vectors
                GROUP BY identity, scope_hash
            """,
            # A scope's vectors by record id: an index is built from them in pages
            # (vectors.in_scope); it leads with (identity, scope_hash), so it replaces the
            # index on those two.
            "CREATE INDEX memory_vectors_scope ON memory_vectors"
            " (identity, scope_hash, record_id)",
            "DROP INDEX memory_vectors_identity",
            _VECTOR_TRIGGER_FUNCTION,
            "CREATE TRIGGER vector_changed AFTER INSERT OR UPDATE ON memory_vectors"
            " FOR EACH ROW EXECUTE FUNCTION vector_changed()",
            _VECTORS_REMOVED_FUNCTION,
            "CREATE TRIGGER vectors_removed AFTER DELETE ON memory_vectors"
            " REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
            " EXECUTE FUNCTION vectors_removed()",
        ),
    ),
    Migration(
        version=8,
        description="event time: when what a record tells happened (occurred_at)",
        statements=(
            # A nullable column without a default: a catalogue change, no table rewrite.
            # NULL means nobody said; the event time is then created_at (coalesce). The
            # postings carry no copy: event-time filters join the records row.
            "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS occurred_at double precision",
        ),
    ),
    Migration(
        version=9,
        description="the lexical index rebuilt with the stemming analyzer: "
                    + tokens.ANALYZER,
        # No SQL: the terms come from Python (postgres_reindex), see _REBUILDS.
        statements=(),
    ),
    Migration(
        version=10,
        description="scope revisions: a revision per scope advanced by triggers in the "
                    "transaction of every change to its records or vectors, and a "
                    "per-tenant epoch; partial indexes for the instants that end a page",
        statements=(
            # Read by every process's search cache before it serves a page (one point
            # read): a write or an erasure on any node invalidates every node's cached
            # pages at commit. ``name`` is a scope hash or ``epoch:<tenant>``. No
            # backfill: no page was ever stored under a revision read here. The row lock
            # an advance takes is no new wait: a scope belongs to one tenant, whose
            # writers are serialised already.
            """
            CREATE TABLE scope_revisions (
                name text COLLATE "C" PRIMARY KEY,
                revision bigint NOT NULL
            )
            """,
            _REVISIONS_FUNCTION,
            *(f"CREATE TRIGGER scope_revision_{event.lower()} AFTER {event} ON {table}"
              f" REFERENCING {'OLD' if event == 'DELETE' else 'NEW'} TABLE AS changed"
              " FOR EACH STATEMENT EXECUTE FUNCTION scope_revisions_advance()"
              for table in ("memory_records", "memory_vectors")
              for event in ("INSERT", "UPDATE", "DELETE")),
            *(f"CREATE INDEX memory_records_{column} ON memory_records (scope_hash, {column})"
              f" WHERE {column} IS NOT NULL"
              for column in ("expires_at", "valid_from", "invalid_at")),
        ),
    ),
    # The audit trail's tables and the trigger that feeds it from event_outbox (see
    # postgres_trail_schema); inert until a postgres-trail sink switches the trail on.
    Migration(version=11, description=trail_schema.DESCRIPTION,
              statements=trail_schema.STATEMENTS),
    Migration(
        version=12,
        description="compare_and_set_applied: a queued compare-and-set fails its unit "
                    "with a conflict when it changed no row",
        # An update then costs two round trips instead of three: its compare-and-set
        # travels with the COMMIT (postgres_statements.PostgresRecords.replace), since
        # no statement's result needs reading before it.
        statements=(_CAS_FUNCTION,),
    ),
    Migration(
        version=13,
        description="the expiry index of every scope: the maintenance round purges "
                    "expired records store-wide, earliest expiry first",
        # memory_records_expires_at leads with the scope; the store-wide purge reads the
        # earliest expiries of every scope, so it needs expiry first. Partial: records
        # that never expire write no entry. Built under the migration's exclusive lock
        # (writers wait for it, as for every migration); nothing is rewritten.
        statements=(
            "CREATE INDEX memory_records_expiry ON memory_records (expires_at, id)"
            " WHERE expires_at IS NOT NULL",
        ),
    ),
)

_REBUILDS: Final = frozenset({9})
"""Versions after whose statements the lexical index is rebuilt from the records with
the current analyzer (:func:`~postgres.migrating.apply_migrations`), in the same
transaction. A version that changes what ``tokens.words`` returns belongs here (SQLite's
counterpart rebuilds in SQL)."""

LATEST_VERSION: Final = MIGRATIONS[-1].version


async def migrate(conn: AsyncConnection[dict[str, Any]], schema: str, applied_at: float) -> int:
    """Create ``schema`` if needed and bring it to ``LATEST_VERSION``, all in one
    transaction: a failure leaves the database as it was. Returns the version the
    schema is at (``LATEST_VERSION``, unless a test shortened ``MIGRATIONS``)."""
    return await apply_migrations(conn, schema, applied_at, MIGRATIONS, _REBUILDS)
