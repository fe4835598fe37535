"""The namespace mapping: rules, placement, and the scopes a prefix reaches."""

from __future__ import annotations

import pytest
from governed_memory import MemoryValidationError, Scope
from governed_memory_langgraph import DEFAULT_MAPPING, NamespaceMapping, NamespaceRule
from governed_memory_langgraph.items import decode, encode, record_key
from langgraph_support import ADMIN, ALICE

MAPPING = NamespaceMapping([
    NamespaceRule(("kb", "{project_id}", "..."), per_user=False),
    NamespaceRule(("users", "{user_id}", "*")),
    NamespaceRule(("runs", "{run_id}"), fixed={"agent_id": "planner"}),
    ("...",),
])


def test_the_default_puts_every_namespace_in_the_principals_user_scope() -> None:
    for namespace in [("memories",), ("a", "b", "c"), ("acme", "bob")]:
        assert DEFAULT_MAPPING.place(ALICE, namespace).scope == Scope("acme", user_id="alice")
    assert DEFAULT_MAPPING.place(ADMIN, ("x",)).scope == Scope("acme")


def test_rules_place_namespaces_in_order() -> None:
    assert MAPPING.place(ALICE, ("kb", "docs", "faq")).scope == Scope("acme",
                                                                       project_id="docs")
    assert MAPPING.place(ALICE, ("users", "bob", "notes")).scope == Scope("acme",
                                                                           user_id="bob")
    assert MAPPING.place(ALICE, ("runs", "r1")).scope == Scope(
        "acme", user_id="alice", run_id="r1", agent_id="planner")
    # ("users", "bob") has too few labels for the users rule: the catch-all takes it.
    assert MAPPING.place(ALICE, ("users", "bob")).scope == Scope("acme", user_id="alice")
    with pytest.raises(MemoryValidationError, match="matches no rule"):
        NamespaceMapping([("memories", "*")]).place(ALICE, ("memories",))
    with pytest.raises(MemoryValidationError):  # a label that can be no scope value
        MAPPING.place(ALICE, ("kb", "%", "x"))


def test_the_scopes_a_prefix_reaches() -> None:
    assert MAPPING.reachable(ALICE, ("kb", "docs")) == (
        Scope("acme", project_id="docs"), Scope("acme", user_id="alice"))
    # The project is not named: that rule is skipped, the user rule fills in Alice.
    assert MAPPING.reachable(ALICE, ()) == (
        Scope("acme", user_id="alice"),)
    assert MAPPING.reachable(ALICE, ("runs", "r1")) == (
        Scope("acme", user_id="alice", run_id="r1", agent_id="planner"),
        Scope("acme", user_id="alice"))
    assert MAPPING.reachable(ALICE, ("users", "*"), wildcards=True) == (
        Scope("acme", user_id="alice"),)
    assert MAPPING.reachable(ALICE, ("users", "bob")) == (
        Scope("acme", user_id="bob"), Scope("acme", user_id="alice"))
    # A principal bound to no user reaches no per-user scope it cannot name.
    assert NamespaceMapping([("users", "{user_id}")]).reachable(ADMIN, ("users",)) == ()


@pytest.mark.parametrize("rule", [
    {"pattern": ()},
    {"pattern": ("...", "x")},
    {"pattern": ("{tenant_id}",)},
    {"pattern": ("{colour}",)},
    {"pattern": ("{user_id}", "{user_id}")},
    {"pattern": ("a.b",)},
    {"pattern": ("x",), "fixed": {"tenant_id": "acme"}},
    {"pattern": ("{user_id}",), "fixed": {"user_id": "bob"}},
    {"pattern": ("x",), "fixed": {"project_id": "*"}},
    {"pattern": "memories"},
])
def test_rules_that_make_no_sense_are_refused(rule: dict[str, object]) -> None:
    with pytest.raises(MemoryValidationError):
        NamespaceRule(**rule)  # type: ignore[arg-type]


def test_the_record_key_is_opaque_unique_and_bounded() -> None:
    keys = {record_key(ns, k) for ns, k in [(("a", "b"), "c"), (("a",), "b,c"),
                                            (("a", "b", "c"), ""), (("ab",), "c")]}
    assert len(keys) == 4
    assert len(record_key(("x" * 300,) * 5, "y" * 300)) == len("lg1:") + 64


def test_content_and_metadata_round_trip() -> None:
    from governed_memory import MemoryRecord
    from governed_memory.records import RecordStatus

    def stored(value: dict[str, object], index: object = None) -> MemoryRecord:
        encoded = encode(("m", "n"), "k", value, index,  # type: ignore[arg-type]
                         default_fields=None, content_field="content")
        return MemoryRecord(id="01", scope=Scope("t"), scope_hash=Scope("t").scope_hash,
                            content=encoded.content, memory_type="note",  # type: ignore[arg-type]
                            version=1, revision="r", content_hash="h",
                            status=RecordStatus.ACTIVE, created_at=0.0, updated_at=0.0,
                            metadata=encoded.metadata)

    moved = stored({"content": "Alice likes tea", "n": 1})
    assert moved.content == "Alice likes tea" and "content" not in moved.metadata
    nested = {"content": {"name": "Alice"}, "tags": ["a", "b"]}
    whole = stored(nested)
    assert whole.content == '{"content": {"name": "Alice"}, "tags": ["a", "b"]}'
    unindexed = stored({"content": "x", "n": 2}, False)
    assert unindexed.metadata["langgraph:indexed"] is False
    for record, value in [(moved, {"content": "Alice likes tea", "n": 1}), (whole, nested),
                          (unindexed, {"content": "x", "n": 2})]:
        decoded = decode(record)
        assert decoded is not None
        assert (decoded.namespace, decoded.key, decoded.value) == (("m", "n"), "k", value)
