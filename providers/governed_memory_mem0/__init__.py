"""Mem0 behind the governed contract (in-process ``mem0ai`` and the hosted Platform)."""
