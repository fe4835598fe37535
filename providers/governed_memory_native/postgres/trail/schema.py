"""The audit trail's tables in a native PostgreSQL schema (one migration of
:mod:`postgres.schema`), and what the trail's code says about them.

- ``audit_chain``: one row once a trail is switched on for the schema (the first
  ``postgres-trail`` sink to open creates it): the chain's id, when it began, its
  genesis hash, and how far it reaches (entries, head hash, the Merkle frontier after
  them). The sequencer updates it with each batch it commits.
- ``audit_intake``: events recorded and waiting for a position, oldest ``id`` first.
  A sink's ``emit`` inserts here; so does the trigger below, in the transaction of the
  write whose committed event the provider stores in ``event_outbox``. ``event_id`` is
  unique: a redelivery is one row.
- ``audit_entries``: the chain, one row per position: the event's canonical bytes, the
  previous hash and its own (``governed_memory.audit.chain``'s rules) and the event's
  Merkle leaf hash (``proofs.leaf_hash``), so proofs read 32 bytes per entry. A unique
  ``event_id`` makes a second position for one event impossible, whatever any
  sequencer believes.

The trigger is why the outbox's two consumers cannot lose an event or record it twice
between them: the trail's copy of a write's committed event commits with the write
itself, before the manager's ``OutboxDispatcher`` can see (let alone acknowledge and
delete) the outbox row; what the dispatcher does to the outbox afterwards cannot touch
the copy, and the sequencer gives a position once per ``event_id``.
"""

from __future__ import annotations

from typing import Final

DESCRIPTION: Final = ("the audit trail: the chain's head, the intake of recorded events "
                      "(a write's committed event taken from event_outbox in the write's "
                      "transaction) and the sequenced entries with their Merkle leaves")

_OUTBOX_TAKEN_FUNCTION: Final = (
    # SET search_path FROM CURRENT: this schema's tables, whatever the firing session's
    # search_path. Once per statement over the rows it stored (``added``): a write stores
    # one event; the trail is switched on when its chain row exists.
    "CREATE FUNCTION audit_outbox_added() RETURNS trigger LANGUAGE plpgsql"
    " SET search_path FROM CURRENT AS $body$ BEGIN"
    " IF EXISTS (SELECT 1 FROM audit_chain) THEN"
    " INSERT INTO audit_intake (event_id, body, stored)"
    " SELECT event_id, body, true FROM added ORDER BY seq"
    " ON CONFLICT (event_id) DO NOTHING;"
    " END IF; RETURN NULL; END $body$"
)

STATEMENTS: Final[tuple[str, ...]] = (
    """
    CREATE TABLE audit_chain (
        id smallint PRIMARY KEY CHECK (id = 1),
        chain_id text NOT NULL,
        created_at double precision NOT NULL,
        genesis text NOT NULL,
        entries bigint NOT NULL,
        head text NOT NULL,
        frontier bytea NOT NULL,
        stored_content_hashes boolean NOT NULL
    )
    """,
    # ``stored``: taken from event_outbox by the trigger (the event as the provider
    # stored it) rather than handed over by a sink's emit (as the profile shaped it).
    """
    CREATE TABLE audit_intake (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        event_id text COLLATE "C" NOT NULL UNIQUE,
        body text NOT NULL,
        stored boolean NOT NULL
    )
    """,
    """
    CREATE TABLE audit_entries (
        seq bigint PRIMARY KEY,
        event_id text COLLATE "C" NOT NULL UNIQUE,
        event text NOT NULL,
        prev text NOT NULL,
        hash text NOT NULL,
        leaf bytea NOT NULL
    )
    """,
    _OUTBOX_TAKEN_FUNCTION,
    "CREATE TRIGGER audit_outbox_added AFTER INSERT ON event_outbox"
    " REFERENCING NEW TABLE AS added FOR EACH STATEMENT"
    " EXECUTE FUNCTION audit_outbox_added()",
)
