"""The one analyzer behind lexical search, shared by every backend.

A term is a word of the text, normalized, then stemmed. A word is a run of letters and
digits (underscores and punctuation separate) after NFKD normalization, with combining
marks dropped and case folded: the ``ﬁ`` ligature is ``fi``, fullwidth letters are ASCII
ones, ``x²`` is ``x2`` and ``Café`` is ``cafe``. An English possessive (``Anna's``,
``Anna\u2019s``) loses its ``'s`` first, so it is the word ``anna`` and not ``anna`` plus a
stray ``s``. Each word is then reduced to its Snowball English (Porter2) stem by
PyStemmer, so ``cooking``, ``cooked`` and ``cooks`` are all ``cook``. No stop words are
dropped. ``bench/analysis.py`` chose this on data (``bench/results/analysis.md``): the
possessive rule and stemming each helped lexical hit@10 on the conversations or on the
Wikipedia set and never cost more than 0.008; stop words and digit splitting cost up to
0.016; the pure-Python snowballstemmer gives the same stems about 100 times slower.

Both sides of a search go through it: every backend's lexical index (memory, SQLite and
PostgreSQL postings alike) holds :func:`words` of each record's content, and queries are
cut into the same terms, so all backends see exactly the same tokens. (A database's own
tokenizer would differ: FTS5's ``unicode61`` misses ligatures and fullwidth forms and
merges the Greek final sigma with the medial one; PostgreSQL's parsers stem with other
rules.) Query words reach SQL as bound parameters compared with stored terms, never as a
query language, so user text can never be parsed as syntax. :func:`index_text` (the
terms joined by spaces) is what the SQLite schema migrations split to rebuild postings of
stored records.

Stored postings hold the terms of the analyzer that wrote them, so changing what
:func:`words` returns for any text is a schema change: it needs a migration that
rebuilds every backend's lexical index (SQLite v13 and PostgreSQL v9 did it for
:data:`ANALYZER`), and ``tests/native/test_native_analyzer_migration.py`` pins the output.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from typing import Final

import Stemmer  # type: ignore[import-not-found]  # PyStemmer: a C extension, no stubs

ANALYZER: Final = "words/nfkd-casefold + possessive + snowball-english (PyStemmer 3)"
"""What :func:`words` does, as recorded in the migrations that indexed with it."""

_WORD: Final = re.compile(r"[^\W_]+")
POSSESSIVE: Final = re.compile(r"(?<=[^\W_])['\u2019]s\b", re.IGNORECASE)
"""An English possessive's ``'s`` (or ``\u2019s``) after a letter or digit."""
MAX_QUERY_TOKENS: Final = 128
"""Bounds the cost of one search: a 4 KiB query could otherwise OR a thousand terms."""


class _Stemmers(threading.local):
    """A stemmer per thread: a PyStemmer object (and its cache of recent stems) may not
    be shared between threads, and SQLite's worker thread tokenizes beside the loop."""

    def __init__(self) -> None:
        self.english = Stemmer.Stemmer("english")


_STEMMERS: Final = _Stemmers()


def plain_words(text: str) -> list[str]:
    """Every word of ``text``, normalized but neither stemmed nor stripped of
    possessives: the analyzer before SQLite v13, which ``bench/analysis.py`` extends."""
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    found: list[str] = _WORD.findall(stripped.lower())
    return found


def words(text: str) -> list[str]:
    """Every term of ``text``, normalized and stemmed, in order and with repeats."""
    found = plain_words(POSSESSIVE.sub("", text))
    if not found:
        return found
    stems: list[str] = _STEMMERS.english.stemWords(found)
    return stems


def index_text(content: str) -> str:
    """``content``'s terms, space-separated (SQLite migrations split it in SQL)."""
    return " ".join(words(content))


def word_count(content: str) -> int:
    """The document length BM25 normalizes by: how many terms ``content`` has."""
    return len(words(content))


def query_tokens(query: str) -> tuple[str, ...]:
    """Distinct query terms in first-seen order, at most ``MAX_QUERY_TOKENS``."""
    return tuple(dict.fromkeys(words(query)))[:MAX_QUERY_TOKENS]
