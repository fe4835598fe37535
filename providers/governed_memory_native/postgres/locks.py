"""The advisory-lock keys that keep PostgreSQL writers and migrations of a schema apart.

Migrations take the schema key exclusively; writers of one tenant take it shared and then
their tenant's key exclusively, and writers that may touch any tenant take the schema key
exclusively (see :mod:`postgres.backend`). So a schema change never interleaves with a
write of a process still running older code, and tenants still write in parallel. The
keys are derived from names, never stored, so every process of every version computes the
same ones; they have a module of their own because the writers, the migrator
(:mod:`postgres.migrating`) and the audit trail's sequencer all take them.
"""

from __future__ import annotations

import hashlib


def writer_lock_key(schema: str) -> int:
    """The schema's advisory lock key, as a bigint.

    Migrations take it exclusively; writers of one tenant take it shared and writers
    that may touch any tenant exclusively. Code before per-tenant writers took it
    exclusively for every write, so during a rolling upgrade old and new processes
    still exclude each other. Advisory locks are database-wide, so the key is derived
    from the schema name: two providers on different schemas of one database never
    wait for each other.
    """
    return _key(b"governed-memory/writer/" + schema.encode())


def tenant_lock_key(schema: str, tenant_id: str) -> int:
    """The advisory lock key of one tenant's writers on ``schema``, as a bigint.

    Two tenants whose keys collide (a chance of 2**-64) only serialise with each other,
    which costs parallelism, never correctness. The key never equals the schema key: a
    writer holds both, and taking the same key shared and then exclusively could wait
    for itself behind another holder.
    """
    key = _key(b"governed-memory/tenant-writer/" + schema.encode() + b"\x00"
               + tenant_id.encode())
    return key if key != writer_lock_key(schema) else key ^ 1


def _key(material: bytes) -> int:
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big", signed=True)
