"""The extraction queue the native provider keeps (``governed_memory.extraction_jobs``):
in process memory, in the SQLite database file, or in the PostgreSQL schema, beside the
memories, on connections of its own."""
