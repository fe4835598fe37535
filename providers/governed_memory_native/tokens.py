"""The one word tokenizer behind lexical search, shared by every backend.

A word is a run of letters and digits (underscores and punctuation separate) after
NFKD normalization, with combining marks dropped and case folded: the ``ﬁ`` ligature is
``fi``, fullwidth letters are ASCII ones, ``x²`` is ``x2`` and ``Café`` is ``cafe``. Both
sides of a search go through it: every backend's lexical index (memory, SQLite and
PostgreSQL postings alike) holds :func:`words` of each record's content, and queries are
cut into the same words, so all backends see exactly the same tokens. (A database's own
tokenizer would differ: FTS5's ``unicode61`` misses ligatures and fullwidth forms and
merges the Greek final sigma with the medial one; PostgreSQL's parsers stem.) Query words
reach SQL as bound parameters compared with stored terms, never as a query language, so
user text can never be parsed as syntax. :func:`index_text` (the words joined by spaces)
is what the SQLite schema migrations split to rebuild postings of stored records.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

_WORD: Final = re.compile(r"[^\W_]+")
MAX_QUERY_TOKENS: Final = 128
"""Bounds the cost of one search: a 4 KiB query could otherwise OR a thousand terms."""


def words(text: str) -> list[str]:
    """Every word of ``text``, normalized, in order and with repeats."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _WORD.findall(stripped.lower())


def index_text(content: str) -> str:
    """``content``'s words, space-separated (SQLite migrations split it in SQL)."""
    return " ".join(words(content))


def word_count(content: str) -> int:
    """The document length BM25 normalizes by: how many words ``content`` has."""
    return len(words(content))


def query_tokens(query: str) -> tuple[str, ...]:
    """Distinct query words in first-seen order, at most ``MAX_QUERY_TOKENS``."""
    return tuple(dict.fromkeys(words(query)))[:MAX_QUERY_TOKENS]
