"""The SQLite backend: the embedded, durable default, with its schema, connection
setup, transactions, lexical index upkeep and rate windows."""
