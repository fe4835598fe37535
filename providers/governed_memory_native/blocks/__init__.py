"""The memory-blocks tier's stores (agent-edited core memory, kept by this provider's
backends): versions of each block per exact scope on SQLite and on PostgreSQL, with one
row layout."""
