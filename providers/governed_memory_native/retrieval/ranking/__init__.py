"""Lexical searches ranked in worker processes: the pool, the worker and what they say to
each other."""
