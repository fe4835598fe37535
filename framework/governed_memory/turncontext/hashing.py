"""Content identity for facts: the same statement in the same scope is the same fact,
whatever its spacing or case. A retried turn therefore re-derives the same hashes and
stores nothing new."""

from __future__ import annotations

import hashlib

from governed_memory.scope import Scope

FACT_HASH_KEY = "fact_hash"
"""Metadata key under which extraction stores a fact's hash (for exact lookups)."""


def normalize(content: str) -> str:
    return " ".join(content.split()).casefold()


def fact_hash(scope: Scope, content: str) -> str:
    body = f"{scope.scope_hash}\n{normalize(content)}"
    return "fh1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def content_key(content: str) -> str:
    """Scope-free identity, for deduplicating one recall across levels."""
    return hashlib.sha256(normalize(content).encode("utf-8")).hexdigest()


def reference(content_hash: str, length: int = 10) -> str:
    """The short bracketed reference a prompt shows next to a memory (supersession)."""
    return content_hash.removeprefix("sha256:")[:length]
