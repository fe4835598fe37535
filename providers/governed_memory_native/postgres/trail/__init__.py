"""The ``postgres-trail`` audit sink: the hash-chained trail in PostgreSQL, so every node
records into one trail (its schema, the sequencer that orders it, the sink that feeds it
and the reader the audit tools use)."""
