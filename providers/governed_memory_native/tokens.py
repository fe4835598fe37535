"""The one word tokenizer behind lexical search, shared by every backend.

A word is a run of letters and digits (underscores and punctuation separate) after
NFKD normalization, with combining marks dropped and case folded: the ``ﬁ`` ligature is
``fi``, fullwidth letters are ASCII ones, ``x²`` is ``x2`` and ``Café`` is ``cafe``. Both
sides of a search go through it: the in-memory backend scores these words directly, and
SQLite indexes :func:`index_text` (the words joined by spaces) with FTS5's ``ascii``
tokenizer, which splits on the spaces and leaves every word as it is, so both backends
see exactly the same tokens. (FTS5's ``unicode61`` over raw text folds differently: it
misses ligatures and fullwidth forms, and even over normalized words it merges the Greek
final sigma with the medial one.) Query words reach SQLite as bound parameters compared
with index terms, never as an FTS5 query, so user text can never be parsed as syntax.
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
    """What SQLite's FTS5 index stores for ``content``: its words, space-separated."""
    return " ".join(words(content))


def word_count(content: str) -> int:
    """The document length BM25 normalizes by: how many words ``content`` has."""
    return len(words(content))


def query_tokens(query: str) -> tuple[str, ...]:
    """Distinct query words in first-seen order, at most ``MAX_QUERY_TOKENS``."""
    return tuple(dict.fromkeys(words(query)))[:MAX_QUERY_TOKENS]
