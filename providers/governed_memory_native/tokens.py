"""The one word tokenizer behind lexical search, shared by every backend.

SQLite's FTS5 tokenizer normalizes the indexed text itself; this tokenizer only has to
cut a query into words the same way (letters and digits, underscores and punctuation
separate) so that a query can never smuggle FTS5 syntax in. The in-memory backend uses
it for both sides, so it also folds case and strips diacritics like
``unicode61 remove_diacritics 2`` does.
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


def query_tokens(query: str) -> tuple[str, ...]:
    """Distinct query words in first-seen order, at most ``MAX_QUERY_TOKENS``."""
    return tuple(dict.fromkeys(words(query)))[:MAX_QUERY_TOKENS]


def fts5_match_expression(tokens: tuple[str, ...]) -> str:
    """An FTS5 MATCH expression that ORs each token as a quoted string.

    Quoting makes ``OR``, ``NEAR``, ``*`` or ``column:`` plain words, so user text is
    never parsed as query syntax.
    """
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)
