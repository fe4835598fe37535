"""Scope: the exact owner of a memory, its hash, and narrowing by level."""

from __future__ import annotations

import hashlib
import itertools
import json

import attrs
import pytest
from governed_memory.errors import MemoryValidationError
from governed_memory.scope import (
    DIMENSIONS,
    SCOPE_HASH_PREFIX,
    Scope,
    ScopeLevel,
    compute_scope_hash,
    narrow,
    narrow_levels,
)
from hypothesis import given
from hypothesis import strategies as st

# Printable, non-blank identifiers without the '*' and '%' wildcards: what a scope value may be.
IDENT_CHARS = st.characters(
    blacklist_categories=("Cs", "Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs"),
    blacklist_characters="*%",
)
identifiers = st.text(IDENT_CHARS, min_size=1, max_size=24)

dimension_dicts = st.fixed_dictionaries(
    {"tenant_id": identifiers},
    optional={name: identifiers for name in DIMENSIONS[1:]},
)


def expected_hash(dimensions: dict[str, str]) -> str:
    """The derivation written down in DESIGN.md, recomputed without the framework."""
    canonical = json.dumps(dimensions, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    return "sh1:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


FULL = Scope(
    tenant_id="acme", workspace_id="ws", project_id="proj", user_id="alice",
    session_id="s1", run_id="r1", agent_id="bot", domain_pack="legal",
)


# -- the hash -------------------------------------------------------------------------


def test_scope_hash_is_sha256_of_canonical_json_of_set_dimensions() -> None:
    scope = Scope("acme", user_id="alice", project_id="support")
    assert scope.scope_hash == expected_hash(
        {"tenant_id": "acme", "project_id": "support", "user_id": "alice"}
    )
    assert scope.scope_hash.startswith(SCOPE_HASH_PREFIX)
    assert SCOPE_HASH_PREFIX == "sh1:"
    assert len(scope.scope_hash) == len("sh1:") + 64


def test_unset_dimensions_are_not_part_of_the_hash() -> None:
    # None values are absent from the canonical form, not serialized as null.
    assert Scope("acme").scope_hash == expected_hash({"tenant_id": "acme"})
    assert Scope("acme").scope_hash != expected_hash({"tenant_id": "acme", "user_id": None})


def test_hash_of_every_dimension_and_of_non_ascii_values() -> None:
    assert FULL.scope_hash == expected_hash(FULL.dimensions())
    scope = Scope("größe", user_id="用户", agent_id="ü🙂")
    assert scope.scope_hash == expected_hash(
        {"tenant_id": "größe", "user_id": "用户", "agent_id": "ü🙂"}
    )


def test_compute_scope_hash_ignores_mapping_order() -> None:
    forward = {"tenant_id": "a", "user_id": "u", "run_id": "r"}
    backward = dict(reversed(list(forward.items())))
    assert compute_scope_hash(forward) == compute_scope_hash(backward) == expected_hash(forward)


def test_scope_is_exact_not_a_prefix() -> None:
    tenant = Scope("a")
    user = Scope("a", user_id="u")
    assert tenant.scope_hash != user.scope_hash
    assert tenant != user
    # The same value in a different dimension is a different scope too.
    assert Scope("a", user_id="x").scope_hash != Scope("a", agent_id="x").scope_hash
    assert Scope("a", session_id="x").scope_hash != Scope("a", run_id="x").scope_hash


def test_dimensions_returns_only_set_values_in_canonical_order() -> None:
    scope = Scope("a", run_id="r", user_id="u")
    assert scope.dimensions() == {"tenant_id": "a", "user_id": "u", "run_id": "r"}
    assert list(scope.dimensions()) == ["tenant_id", "user_id", "run_id"]
    assert list(FULL.dimensions()) == list(DIMENSIONS)


def test_scope_hash_is_not_an_init_argument_and_not_part_of_equality() -> None:
    with pytest.raises(TypeError):
        Scope("a", scope_hash="sh1:forged")  # type: ignore[call-arg]
    assert Scope("a", user_id="u") == Scope("a", user_id="u")
    assert hash(Scope("a", user_id="u")) == hash(Scope("a", user_id="u"))


def test_scope_is_frozen() -> None:
    scope = Scope("a")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        scope.tenant_id = "b"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        scope.scope_hash = "sh1:x"  # type: ignore[misc]


@given(first=dimension_dicts, second=dimension_dicts)
def test_property_hash_equal_iff_dimensions_equal(first: dict[str, str],
                                                  second: dict[str, str]) -> None:
    a = Scope.from_dimensions(first)
    b = Scope.from_dimensions(second)
    assert a.scope_hash == expected_hash(first)
    if first == second:
        assert a.scope_hash == b.scope_hash
        assert a == b
    else:
        assert a.scope_hash != b.scope_hash
        assert a != b


@given(dims=dimension_dicts, data=st.data())
def test_property_changing_any_one_dimension_changes_the_hash(dims: dict[str, str],
                                                              data: st.DataObject) -> None:
    scope = Scope.from_dimensions(dims)
    name = data.draw(st.sampled_from(DIMENSIONS))
    new_value = data.draw(identifiers.filter(lambda v: v != dims.get(name)))
    changed = scope.replace(**{name: new_value})
    assert changed.scope_hash != scope.scope_hash
    assert changed.scope_hash == expected_hash({**dims, name: new_value})
    if name != "tenant_id":
        removed = scope.replace(**{name: None})
        assert (removed.scope_hash == scope.scope_hash) == (name not in dims)


@given(dims=dimension_dicts)
def test_property_dimensions_round_trip(dims: dict[str, str]) -> None:
    scope = Scope.from_dimensions(dims)
    assert scope.dimensions() == dims
    assert Scope.from_dimensions(scope.dimensions()) == scope


# -- validation -----------------------------------------------------------------------


def test_from_dimensions_refuses_unknown_dimension_and_names_it() -> None:
    with pytest.raises(MemoryValidationError) as info:
        Scope.from_dimensions({"tenant_id": "a", "planet": "mars"})
    assert "planet" in str(info.value)
    assert info.value.field == "scope"


def test_from_dimensions_names_every_unknown_dimension() -> None:
    with pytest.raises(MemoryValidationError) as info:
        Scope.from_dimensions({"tenant_id": "a", "zeta": "1", "alpha": "2"})
    assert "alpha" in str(info.value)
    assert "zeta" in str(info.value)


@pytest.mark.parametrize("values", [{}, {"user_id": "u"}, {"tenant_id": None}])
def test_from_dimensions_requires_tenant(values: dict[str, str | None]) -> None:
    with pytest.raises(MemoryValidationError) as info:
        Scope.from_dimensions(values)
    assert info.value.field == "scope.tenant_id"


BAD_VALUES = [
    pytest.param("", id="empty"),
    pytest.param("   ", id="whitespace"),
    pytest.param("\t", id="tab-only"),
    pytest.param(" a", id="leading-space"),
    pytest.param("a ", id="trailing-space"),
    pytest.param("*", id="wildcard"),
    pytest.param("acme*", id="wildcard-suffix"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a\nb", id="newline"),
    pytest.param("a\x1bb", id="escape"),
    pytest.param("a\u200bb", id="zero-width-space"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param("a\udfffb", id="lone-low-surrogate"),
    pytest.param("x" * 257, id="257-chars"),
    pytest.param("é" * 257, id="257-multibyte-chars"),
    pytest.param(5, id="int"),
    pytest.param(b"acme", id="bytes"),
]


@pytest.mark.parametrize("value", BAD_VALUES)
def test_bad_tenant_id_is_refused(value: object) -> None:
    with pytest.raises(MemoryValidationError) as info:
        Scope(tenant_id=value)  # type: ignore[arg-type]
    assert info.value.field == "scope.tenant_id"


@pytest.mark.parametrize("name", DIMENSIONS[1:])
@pytest.mark.parametrize("value", ["", "  ", "*", "a\x07", "\ud800", "y" * 257])
def test_bad_value_in_any_dimension_is_refused_and_named(name: str, value: str) -> None:
    with pytest.raises(MemoryValidationError) as info:
        Scope.from_dimensions({"tenant_id": "a", name: value})
    assert info.value.field == f"scope.{name}"


def test_boundary_lengths_are_accepted() -> None:
    assert Scope("x" * 256).tenant_id == "x" * 256
    # 256 characters of 4 UTF-8 bytes each: the limit is in characters.
    assert Scope("🙂" * 256, user_id="é" * 256).user_id == "é" * 256
    assert Scope("a b").tenant_id == "a b"  # inner spaces are fine


# -- narrowing -------------------------------------------------------------------------


NARROWED = {
    ScopeLevel.GLOBAL: {"tenant_id": "acme", "domain_pack": "legal"},
    ScopeLevel.TENANT: {"tenant_id": "acme", "workspace_id": "ws", "domain_pack": "legal"},
    ScopeLevel.PROJECT: {"tenant_id": "acme", "workspace_id": "ws", "project_id": "proj",
                         "domain_pack": "legal"},
    # the reference's owner scoping: a user's memories follow them across projects
    ScopeLevel.USER: {"tenant_id": "acme", "workspace_id": "ws", "user_id": "alice",
                      "domain_pack": "legal"},
    ScopeLevel.SESSION: {"tenant_id": "acme", "workspace_id": "ws", "user_id": "alice",
                         "session_id": "s1", "agent_id": "bot", "domain_pack": "legal"},
    ScopeLevel.RUN: FULL.dimensions(),
}


def test_every_level_is_covered() -> None:
    assert set(NARROWED) == set(ScopeLevel)


@pytest.mark.parametrize("level", list(ScopeLevel))
def test_narrow_keeps_the_dimensions_of_the_level(level: ScopeLevel) -> None:
    narrowed = narrow(FULL, level)
    assert narrowed.dimensions() == NARROWED[level]
    assert narrowed.scope_hash == expected_hash(NARROWED[level])


def test_levels_nest_except_project_and_user_which_are_siblings() -> None:
    order = list(ScopeLevel)
    for wider, narrower in itertools.pairwise(order):
        if (wider, narrower) == (ScopeLevel.PROJECT, ScopeLevel.USER):
            assert "project_id" not in NARROWED[narrower]
            assert set(NARROWED[ScopeLevel.TENANT]) <= set(NARROWED[narrower])
            continue
        assert set(NARROWED[wider]) <= set(NARROWED[narrower])


def test_a_user_level_memory_is_the_same_scope_in_every_project() -> None:
    in_a = narrow(Scope("acme", project_id="a", user_id="alice"), ScopeLevel.USER)
    in_b = narrow(Scope("acme", project_id="b", user_id="alice"), ScopeLevel.USER)
    assert in_a == in_b == Scope("acme", user_id="alice")
    assert narrow(Scope("acme", project_id="a", user_id="alice"), ScopeLevel.PROJECT) != \
        narrow(Scope("acme", project_id="b", user_id="alice"), ScopeLevel.PROJECT)


def test_narrow_without_optional_dimensions_keeps_what_is_set() -> None:
    scope = Scope("acme", user_id="alice", session_id="s")
    assert narrow(scope, ScopeLevel.GLOBAL) == Scope("acme")
    assert narrow(scope, ScopeLevel.TENANT) == Scope("acme")
    assert narrow(scope, ScopeLevel.USER) == Scope("acme", user_id="alice")
    assert narrow(scope, ScopeLevel.SESSION) == scope


@pytest.mark.parametrize(
    ("level", "missing"),
    [
        (ScopeLevel.PROJECT, "project_id"),
        (ScopeLevel.USER, "user_id"),
        (ScopeLevel.SESSION, "session_id"),
        (ScopeLevel.RUN, "run_id"),
    ],
)
def test_narrow_to_level_without_its_defining_dimension_raises(level: ScopeLevel,
                                                                missing: str) -> None:
    scope = FULL.replace(**{missing: None})
    with pytest.raises(MemoryValidationError) as info:
        narrow(scope, level)
    assert info.value.field == f"scope.{missing}"
    assert level.value in str(info.value)


def test_narrow_to_user_without_user_id_raises() -> None:
    with pytest.raises(MemoryValidationError, match="user_id"):
        narrow(Scope("acme", project_id="p"), ScopeLevel.USER)


def test_narrow_levels_returns_distinct_scopes_narrowest_first() -> None:
    result = narrow_levels(FULL, (ScopeLevel.TENANT, ScopeLevel.RUN, ScopeLevel.USER))
    assert result == (
        narrow(FULL, ScopeLevel.RUN),
        narrow(FULL, ScopeLevel.USER),
        narrow(FULL, ScopeLevel.TENANT),
    )
    assert len({s.scope_hash for s in result}) == 3


def test_narrow_levels_drops_levels_that_collapse_to_the_same_scope() -> None:
    scope = Scope("acme", user_id="alice")
    result = narrow_levels(scope, (*tuple(ScopeLevel)[:2], ScopeLevel.USER, ScopeLevel.USER))
    # GLOBAL and TENANT both narrow to {tenant}: one exact scope, not two.
    assert result == (Scope("acme", user_id="alice"), Scope("acme"))


def test_narrow_levels_all_levels_of_full_scope() -> None:
    result = narrow_levels(FULL, tuple(ScopeLevel))
    assert [s.dimensions() for s in result] == [NARROWED[lv] for lv in reversed(ScopeLevel)]


def test_narrow_levels_empty_and_missing_dimension() -> None:
    assert narrow_levels(FULL, ()) == ()
    with pytest.raises(MemoryValidationError):
        narrow_levels(Scope("acme"), (ScopeLevel.TENANT, ScopeLevel.USER))


# -- replace ---------------------------------------------------------------------------


def test_replace_sets_changes_and_unsets_dimensions() -> None:
    scope = Scope("acme", user_id="alice")
    moved = scope.replace(user_id="bob", session_id="s")
    assert moved == Scope("acme", user_id="bob", session_id="s")
    assert moved.scope_hash == expected_hash(
        {"tenant_id": "acme", "user_id": "bob", "session_id": "s"}
    )
    assert scope.replace(user_id=None) == Scope("acme")
    assert scope == Scope("acme", user_id="alice")  # the original is untouched
    assert scope.replace() == scope


def test_replace_validates() -> None:
    scope = Scope("acme")
    with pytest.raises(MemoryValidationError, match="planet"):
        scope.replace(planet="mars")
    with pytest.raises(MemoryValidationError) as info:
        scope.replace(tenant_id=None)
    assert info.value.field == "scope.tenant_id"
    with pytest.raises(MemoryValidationError) as info:
        scope.replace(user_id="*")
    assert info.value.field == "scope.user_id"
