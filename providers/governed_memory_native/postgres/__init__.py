"""The PostgreSQL backend: the native provider for several processes and machines, with
its schema, transactions, errors, lexical reindexing, rate windows and the audit trail
kept in the same database."""
