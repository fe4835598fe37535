"""Retrieval, written once for every backend: the analyzer, BM25 and the exact lexical
top-k, vectors and their indexes, fusion of the signals, ranking in worker processes,
the indexing outbox that gives records their vectors, and retrieval snapshots for replay.
"""
