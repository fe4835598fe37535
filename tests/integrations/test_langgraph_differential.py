"""GovernedStore against LangGraph's InMemoryStore: the same operations, the same answers.

Hypothesis draws sequences of put, delete, get, search and list_namespaces over a small
set of namespaces, keys and values, runs each on both stores and compares, modulo the
differences docs/langgraph.md lists ("Differences from InMemoryStore"):

- timestamps are not compared (each store keeps its own clock);
- a search without a query lists items oldest first across namespaces, where
  InMemoryStore groups them by namespace: results are compared as sets, and in order
  within each namespace;
- a search with a query is a governed (here lexical) search: it returns exactly the
  items InMemoryStore's filter returns whose indexed text has a word of the query
  (InMemoryStore without embeddings ignores the query), in ranked order;
- ``list_namespaces`` lists namespaces holding an item; InMemoryStore also lists a
  namespace that was only read, or whose items were all deleted;
- an ordering operator (``$gt``, ...) on a missing or non-numeric field matches nothing,
  where InMemoryStore raises ``TypeError``.

One principal acts throughout, so governance refuses nothing here; what it refuses is
tested in test_langgraph_store.py and test_langgraph_governance.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from governed_memory import GovernedMemoryManager, Permission, Principal
from governed_memory.sync import SyncMemoryManager
from governed_memory_langgraph import GovernedStore, NamespaceMapping, NamespaceRule
from governed_memory_native.retrieval.tokens import words
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, Item, SearchItem
from langgraph.store.memory import InMemoryStore

NAMESPACES = [("a",), ("a", "x"), ("a", "x", "y"), ("b",), ("b", "x")]
PREFIXES = [(), ("a",), ("a", "x"), ("b",), ("b", "x"), ("c",)]
KEYS = ["k1", "k2", "k3"]
WORDS = ["tea", "coffee", "seat", "window", "dog", "cat"]

MAPPINGS = {
    "default": None,
    # Namespaces under "b" live in a project scope of their own: searches and listings
    # then merge two scopes.
    "two scopes": NamespaceMapping([NamespaceRule(("b", "..."), fixed={"project_id": "p"}),
                                    ("...",)]),
}

_users = itertools.count()

sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
scalars = st.one_of(st.integers(-5, 5), st.sampled_from(["red", "blue"]), st.booleans(),
                    st.floats(-2, 2, allow_nan=False).map(lambda f: round(f, 2)))
values = st.fixed_dictionaries(
    {},
    optional={
        "content": sentences,
        "tag": st.sampled_from(["red", "blue"]),
        "n": st.integers(0, 9),
        "extra": st.one_of(scalars, st.lists(scalars, max_size=3),
                           st.dictionaries(st.sampled_from(["p", "q"]), scalars, max_size=2)),
    }).filter(bool)
filters = st.one_of(
    st.none(),
    st.fixed_dictionaries({"tag": st.sampled_from(["red", "blue"])}),
    st.fixed_dictionaries({"n": st.fixed_dictionaries(
        {}, optional={"$gt": st.integers(0, 9), "$lte": st.integers(0, 9)}).filter(bool)}),
    st.fixed_dictionaries({"tag": st.sampled_from(["red", "blue"]),
                           "n": st.fixed_dictionaries({"$ne": st.integers(0, 9)})}),
)
operations = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), values),
    st.tuples(st.just("put"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS), values),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("get"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("search"), st.sampled_from(PREFIXES), filters,
              st.one_of(st.none(), st.sampled_from(WORDS))),
    st.tuples(st.just("list"), st.one_of(st.none(), st.sampled_from(PREFIXES[1:])),
              st.one_of(st.none(), st.sampled_from([("x",), ("y",), ("a",)])),
              st.one_of(st.none(), st.integers(1, 3))),
), min_size=1, max_size=25)


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def memory(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncMemoryManager]:
    """One manager per backend for the module; each example acts as a fresh user."""
    from governed_memory.clock import SystemClock
    from governed_memory_native import build_native_provider

    config = ({"backend": "memory"} if request.param == "memory" else
              {"backend": "sqlite",
               "path": str(tmp_path_factory.mktemp("differential") / "memory.db")})
    clock = SystemClock()
    manager = GovernedMemoryManager(build_native_provider(config, clock), clock=clock)
    with SyncMemoryManager(manager) as sync:
        yield sync


def fresh_principal() -> Principal:
    user = f"user{next(_users)}"
    return Principal(f"user:{user}", "user", tenant_id="acme", user_id=user,
                     permissions=[Permission.READ, Permission.WRITE, Permission.DELETE])


def plain(item: Item | None) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def indexed_words(value: dict[str, Any]) -> set[str]:
    from langgraph.store.base import get_text_at_path

    content = value.get("content")
    text = content if isinstance(content, str) else get_text_at_path(value, "$")[0]
    return set(words(text))


def in_memory_matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    """InMemoryStore's own filter, except that where it raises (an ordering operator on
    a missing field) the item does not match, as in GovernedStore."""
    from langgraph.store.memory import _compare_values

    try:
        return all(_compare_values(value.get(k), v) for k, v in (filter or {}).items())
    except (TypeError, ValueError):
        return False


def live_namespaces_store(theirs: InMemoryStore) -> InMemoryStore:
    """An InMemoryStore holding only the live items: what list_namespaces should see."""
    live = InMemoryStore()
    for item in theirs.search((), limit=10_000):
        live.put(item.namespace, item.key, item.value)
    return live


def by_namespace(items: list[SearchItem]) -> dict[tuple[str, ...], list[str]]:
    grouped: dict[tuple[str, ...], list[str]] = {}
    for item in items:
        grouped.setdefault(tuple(item.namespace), []).append(item.key)
    return grouped


def compare(ours: BaseStore, theirs: InMemoryStore, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "put":
        _, namespace, key, value = op
        ours.put(namespace, key, value)
        theirs.put(namespace, key, value)
    elif kind == "delete":
        _, namespace, key = op
        ours.delete(namespace, key)
        theirs.delete(namespace, key)
    elif kind == "get":
        _, namespace, key = op
        assert plain(ours.get(namespace, key)) == plain(theirs.get(namespace, key))
    elif kind == "search":
        _, prefix, filter, query = op
        expected = [i for i in theirs.search(prefix, limit=100)
                    if in_memory_matches(i.value, filter)]
        got = ours.search(prefix, filter=filter, query=query, limit=100)
        if query is not None:
            asked = set(words(query))  # the query's terms are analysed like the text's
            expected = [i for i in expected if asked & indexed_words(i.value)]
            assert all(i.score is not None for i in got)
            scores = [i.score for i in got]
            assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
        else:
            assert by_namespace(got) == by_namespace(expected)
        assert sorted(map(plain, got)) == sorted(map(plain, expected))  # type: ignore[type-var]
    else:
        _, prefix, suffix, depth = op
        live = live_namespaces_store(theirs)
        assert ours.list_namespaces(prefix=prefix, suffix=suffix, max_depth=depth) == (
            live.list_namespaces(prefix=prefix, suffix=suffix, max_depth=depth))


@pytest.mark.parametrize("mapping", MAPPINGS, ids=list(MAPPINGS))
@given(ops=operations)
def test_the_same_operations_give_the_same_answers(memory: SyncMemoryManager, mapping: str,
                                                   ops: list[tuple[Any, ...]]) -> None:
    ours = GovernedStore(memory, namespaces=MAPPINGS[mapping]).bind(fresh_principal())
    theirs = InMemoryStore()
    for op in ops:
        compare(ours, theirs, op)
    # And at the end, everything.
    compare(ours, theirs, ("search", (), None, None))
    compare(ours, theirs, ("list", None, None, None))


def test_pagination_within_one_namespace_matches(memory: SyncMemoryManager) -> None:
    ours = GovernedStore(memory).bind(fresh_principal())
    theirs = InMemoryStore()
    for store in (ours, theirs):
        for i in range(12):
            store.put(("p",), f"k{i:02}", {"content": f"item {i}", "n": i % 3})
        store.delete(("p",), "k03")
        store.put(("p",), "k03", {"content": "back again"})
        store.put(("p",), "k05", {"content": "changed in place"})
    for limit, offset in [(5, 0), (5, 5), (5, 10), (3, 1), (0, 0)]:
        assert [plain(i) for i in ours.search(("p",), limit=limit, offset=offset)] == [
            plain(i) for i in theirs.search(("p",), limit=limit, offset=offset)]
        assert [plain(i) for i in ours.search(("p",), filter={"n": 1}, limit=limit,
                                              offset=offset)] == [
            plain(i) for i in theirs.search(("p",), filter={"n": 1}, limit=limit,
                                            offset=offset)]


def test_the_documented_listing_difference(memory: SyncMemoryManager) -> None:
    ours = GovernedStore(memory).bind(fresh_principal())
    theirs = InMemoryStore()
    for store in (ours, theirs):
        store.get(("only", "read"), "k")
        store.put(("emptied",), "k", {"content": "x"})
        store.delete(("emptied",), "k")
        store.put(("kept",), "k", {"content": "x"})
    assert theirs.list_namespaces() == [("emptied",), ("kept",), ("only", "read")]
    assert ours.list_namespaces() == [("kept",)]
