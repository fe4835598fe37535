"""The conversation tier's stores (another tier than memories, kept by this provider's
backends): turns per session on SQLite and on PostgreSQL, with one row layout."""
