"""A public retrieval set for ``recall.py``: Wikipedia sections, judged by page structure.

The text is the English Wikipedia excerpt that gensim ships in its wheel as test data
(``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-
shortened.bz2``: 206 pages of the 2016 dump, revisions of April 2016). Wikipedia's text
is licensed CC BY-SA 3.0 (and GFDL); gensim itself is LGPL-2.1. Nothing is downloaded:
the file comes with ``pip install gensim==4.4.0`` (the ``bench`` extra) and its SHA-256
is checked before use.

The set is built from it deterministically, the way TREC Complex Answer Retrieval
(Dietz et al., TREC CAR 2017) builds its benchmark from Wikipedia:

- **articles**: the pages of namespace 0 that are no redirect, no disambiguation page
  and no "List of ..." page, in dump order;
- **passages** (one memory each): the paragraphs of each article after gensim's
  ``filter_wiki`` removes the markup, bold/italic quotes dropped, list, table and
  indented lines dropped, whitespace collapsed, at least ``MIN_WORDS`` words; the lead
  section counts, the boilerplate sections ("References", "See also", "External
  links", ... and their subsections) do not. A passage carries neither its article's
  title nor its heading, as in TREC CAR;
- **queries**: one per section or subsection that holds a passage, its text the
  article title followed by the heading path ("Autism Characteristics Social
  development");
- **judgements**, graded: 2 for the passages under that heading, its subsections
  included (TREC CAR's "tree" qrels), 1 for the article's other passages (its "article"
  qrels), 0 for everything else. hit@k counts a grade-2 passage in the first k.

``load(articles=N)`` keeps the first N articles (and so their passages and queries),
which bounds a run; ``fingerprint`` hashes what was built, so two runs can be compared.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

GENERATOR = "wiki-sections-1"
PACKAGE = "gensim"
PACKAGE_VERSION = "4.4.0"
SOURCE = ("gensim/test/test_data/"
          "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
SOURCE_SHA256 = "a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d"
LICENCE = "Wikipedia text: CC BY-SA 3.0 (and GFDL); carried by gensim 4.4.0 (LGPL-2.1)"
MIN_WORDS = 20
SKIPPED_SECTIONS = frozenset({
    "see also", "references", "external links", "further reading", "notes",
    "bibliography", "sources", "citations", "footnotes", "notes and references",
    "references and notes", "works cited", "gallery", "explanatory notes",
    "general references", "primary sources", "secondary sources", "links",
    "external link", "reference", "note", "further information", "cited sources",
})
INSTALL_HINT = (f"the wiki data set comes with {PACKAGE}=={PACKAGE_VERSION} (the bench "
                f"extra): pip install '{PACKAGE}=={PACKAGE_VERSION}' or pip install -e "
                "'.[bench]'")

_HEADING = re.compile(r"^(={2,6})\s*(.+?)\s*\1\s*$", re.MULTILINE)
_QUOTES = re.compile(r"'{2,}")
_SPACES = re.compile(r"\s+")
_NON_PROSE = ("*", "#", ":", ";", "|", "!", "{", "}")


class MissingSource(RuntimeError):
    """The package that carries the text is not installed, or carries other bytes."""


@dataclass(frozen=True)
class Passage:
    passage_id: str
    article: str
    path: tuple[str, ...]
    """Headings above the passage, outermost first; empty in the lead section."""
    text: str


@dataclass(frozen=True)
class Query:
    query_id: str
    text: str
    article: str
    relevance: Mapping[str, int]
    """Passage id -> grade (2 under the heading, 1 elsewhere in the article)."""

    @property
    def evidence(self) -> tuple[str, ...]:
        return tuple(p for p, grade in self.relevance.items() if grade >= 2)


@dataclass(frozen=True)
class WikiSet:
    passages: tuple[Passage, ...]
    queries: tuple[Query, ...]
    articles: tuple[str, ...]
    source: Mapping[str, str] = field(default_factory=dict)


def source_path() -> Path:
    """The dump excerpt inside the installed gensim, checked against its SHA-256."""
    from importlib import metadata

    try:
        distribution = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise MissingSource(f"{PACKAGE} is not installed; {INSTALL_HINT}") from None
    path = Path(str(distribution.locate_file(SOURCE)))
    if not path.is_file():
        raise MissingSource(f"{PACKAGE} {distribution.version} has no {SOURCE}; "
                            f"{INSTALL_HINT}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SOURCE_SHA256:
        raise MissingSource(f"{path} has SHA-256 {digest}, not the {SOURCE_SHA256} of "
                            f"{PACKAGE} {PACKAGE_VERSION}; {INSTALL_HINT}")
    return path


def _pages(path: Path) -> Iterator[tuple[str, str, str]]:
    """(page id, title, wikitext) of every page of namespace 0, in dump order."""
    with bz2.open(path) as stream:
        for _, element in ElementTree.iterparse(stream):
            if not element.tag.endswith("}page"):
                continue
            ns = element.tag[:-len("page")]
            if (element.findtext(f"{ns}ns") or "") == "0":
                text = element.findtext(f"{ns}revision/{ns}text") or ""
                yield (element.findtext(f"{ns}id") or "", element.findtext(f"{ns}title")
                       or "", text)
            element.clear()


def _is_article(title: str, text: str) -> bool:
    return not (text.lstrip().lower().startswith("#redirect")
                or "(disambiguation)" in title or title.startswith("List of"))


def _paragraphs(wikitext: str) -> list[str]:
    from gensim.corpora.wikicorpus import filter_wiki

    plain = _QUOTES.sub("", filter_wiki(wikitext))
    out: list[str] = []
    for block in re.split(r"\n\s*\n", plain):
        lines = [line.strip() for line in block.splitlines()]
        prose = [line for line in lines if line and not line.startswith(_NON_PROSE)]
        text = _SPACES.sub(" ", " ".join(prose)).strip()
        if len(text.split()) >= MIN_WORDS:
            out.append(text)
    return out


def _heading(raw: str) -> str:
    from gensim.corpora.wikicorpus import filter_wiki

    return _SPACES.sub(" ", _QUOTES.sub("", filter_wiki(raw))).strip(" :")


def _sections(wikitext: str) -> Iterator[tuple[tuple[str, ...], str]]:
    """(heading path, body) of the lead and of every section that is not boilerplate
    (nor under boilerplate)."""
    matches = list(_HEADING.finditer(wikitext))
    yield (), wikitext[:matches[0].start()] if matches else wikitext
    stack: list[tuple[int, str]] = []
    for index, match in enumerate(matches):
        level, title = len(match.group(1)), _heading(match.group(2))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = matches[index + 1].start() if index + 1 < len(matches) else len(wikitext)
        path = tuple(name for _, name in stack)
        if not title or any(name.lower() in SKIPPED_SECTIONS for name in path):
            continue
        yield path, wikitext[match.end():end]


def load(articles: int | None = None) -> WikiSet:
    """The set over the first ``articles`` articles (all of them by default)."""
    path = source_path()
    passages: list[Passage] = []
    queries: list[Query] = []
    titles: list[str] = []
    for page_id, title, text in _pages(path):
        if articles is not None and len(titles) >= articles:
            break
        if not _is_article(title, text):
            continue
        mine: list[Passage] = []
        for section_path, body in _sections(text):
            for paragraph in _paragraphs(body):
                mine.append(Passage(f"w{page_id}-{len(mine)}", title, section_path,
                                    paragraph))
        if len(mine) < 3:
            continue
        titles.append(title)
        passages.extend(mine)
        # by first passage, a heading before its subheadings: the order (and so the
        # fingerprint) must not depend on the set's hash order (PYTHONHASHSEED)
        paths = sorted({p.path[:depth] for p in mine for depth in range(1, len(p.path) + 1)},
                       key=lambda h: (next(i for i, p in enumerate(mine)
                                           if p.path[:len(h)] == h), len(h), h))
        for heading_path in paths:
            relevance = {p.passage_id: 2 if p.path[:len(heading_path)] == heading_path
                         else 1 for p in mine}
            queries.append(Query(f"{page_id}-q{len(queries)}",
                                 " ".join((title, *heading_path)), title, relevance))
    return WikiSet(tuple(passages), tuple(queries), tuple(titles),
                   {"package": f"{PACKAGE}=={PACKAGE_VERSION}", "file": SOURCE,
                    "file_sha256": SOURCE_SHA256, "licence": LICENCE})


def fingerprint(data: WikiSet) -> str:
    """SHA-256 over the passages, queries and judgements, in order."""
    digest = hashlib.sha256(GENERATOR.encode())
    for passage in data.passages:
        digest.update(json.dumps([passage.passage_id, passage.text]).encode())
    for query in data.queries:
        digest.update(json.dumps([query.query_id, query.text,
                                  sorted(query.relevance.items())]).encode())
    return digest.hexdigest()


def describe(data: WikiSet) -> dict[str, object]:
    words: Sequence[int] = sorted(len(p.text.split()) for p in data.passages)
    return {"generator": GENERATOR, "articles": len(data.articles),
            "passages": len(data.passages), "queries": len(data.queries),
            "passage_words_median": words[len(words) // 2] if words else 0,
            "relevant_per_query_mean": round(
                sum(len(q.evidence) for q in data.queries) / max(len(data.queries), 1), 2),
            "sha256": fingerprint(data), **data.source}
