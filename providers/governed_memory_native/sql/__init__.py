"""The statements SQLite and PostgreSQL share: one repository set for both dialects.

Each module is one kind of stored thing (records, versions, idempotency, the outbox,
index jobs, vectors, snapshots, revisions, erasure). A dialect supplies only what
genuinely differs (:mod:`sql.dialect`), so the two backends cannot drift apart in what
they store or accept.
"""
