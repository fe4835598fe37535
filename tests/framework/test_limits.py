"""Every DESIGN.md limit, enforced by ``request.validate()`` with the offending field named."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import (
    MAX_CONTENT_BYTES,
    MAX_KEY_BYTES,
    MAX_METADATA_PROVENANCE_BYTES,
    MAX_PAGE_SIZE,
)
from governed_memory.records import Provenance, RecordStatus
from governed_memory.requests import (
    AddRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope

SCOPE = Scope("acme", user_id="alice")
KIB = 1024


def refused(request: Any, field: str) -> MemoryValidationError:
    with pytest.raises(MemoryValidationError) as info:
        request.validate()
    assert info.value.field == field, str(info.value)
    return info.value


def canonical_size(value: dict[str, Any]) -> int:
    """Canonical JSON size, recomputed independently of the framework."""
    return len(json.dumps(value, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8"))


def test_the_limits_are_the_documented_ones() -> None:
    assert MAX_CONTENT_BYTES == 64 * KIB
    assert MAX_KEY_BYTES == 256
    assert MAX_METADATA_PROVENANCE_BYTES == 16 * KIB
    assert MAX_PAGE_SIZE == 100


# -- content ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("unit", "width"),
    [("a", 1), ("é", 2), ("€", 3), ("🙂", 4)],
    ids=["ascii", "2-byte", "3-byte", "4-byte"],
)
def test_content_of_exactly_64_kib_is_accepted_one_byte_more_is_not(unit: str,
                                                                    width: int) -> None:
    exact = unit * (MAX_CONTENT_BYTES // width)
    exact += "a" * (MAX_CONTENT_BYTES - len(exact.encode()))
    assert len(exact.encode("utf-8")) == MAX_CONTENT_BYTES
    AddRequest(scope=SCOPE, content=exact).validate()
    UpdateRequest(scope=SCOPE, record_id="01ABC", content=exact).validate()

    over = exact + "a"
    assert len(over.encode("utf-8")) == MAX_CONTENT_BYTES + 1
    error = refused(AddRequest(scope=SCOPE, content=over), "content")
    assert str(MAX_CONTENT_BYTES) in str(error)
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", content=over), "content")


def test_content_limit_counts_bytes_not_characters() -> None:
    # 21,846 characters of 3 bytes each is 65,538 bytes: far fewer than 64 Ki characters.
    content = "€" * (MAX_CONTENT_BYTES // 3 + 1)
    assert len(content) < MAX_CONTENT_BYTES
    refused(AddRequest(scope=SCOPE, content=content), "content")


@pytest.mark.parametrize("content", ["", " ", "\n\t  "], ids=["empty", "space", "blank"])
def test_empty_content_is_refused(content: str) -> None:
    refused(AddRequest(scope=SCOPE, content=content), "content")
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", content=content), "content")


def test_content_must_be_a_string() -> None:
    refused(AddRequest(scope=SCOPE, content=b"bytes"), "content")  # type: ignore[arg-type]
    refused(AddRequest(scope=SCOPE, content=None), "content")  # type: ignore[arg-type]


# -- key -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["k" * 256, "é" * 128, "€" * 85 + "a", "🙂" * 64],
    ids=["ascii", "2-byte", "3-byte", "4-byte"],
)
def test_key_of_256_utf8_bytes_is_accepted(key: str) -> None:
    assert len(key.encode("utf-8")) == MAX_KEY_BYTES
    AddRequest(scope=SCOPE, content="c", key=key).validate()
    GetRequest(scope=SCOPE, key=key).validate()


@pytest.mark.parametrize(
    "key", ["k" * 257, "é" * 128 + "a", "a" + "é" * 128, "🙂" * 64 + "k"],
    ids=["ascii", "2-byte-plus-one", "one-plus-2-byte", "4-byte-plus-one"],
)
def test_key_of_257_utf8_bytes_is_refused(key: str) -> None:
    assert len(key.encode("utf-8")) == MAX_KEY_BYTES + 1
    refused(AddRequest(scope=SCOPE, content="c", key=key), "key")
    refused(GetRequest(scope=SCOPE, key=key), "key")


def test_key_of_129_two_byte_chars_is_refused_though_only_129_characters() -> None:
    key = "é" * 129
    assert len(key) < MAX_KEY_BYTES
    refused(AddRequest(scope=SCOPE, content="c", key=key), "key")


@pytest.mark.parametrize("key", ["", "   "])
def test_empty_key_is_refused(key: str) -> None:
    refused(AddRequest(scope=SCOPE, content="c", key=key), "key")


# -- metadata and provenance -------------------------------------------------------------


def _metadata_of_size(size: int, char: str = "x") -> dict[str, str]:
    """A one-entry metadata mapping whose canonical JSON is exactly ``size`` bytes."""
    overhead = canonical_size({"k": ""})
    width = len(char.encode())
    body = char * ((size - overhead) // width)
    body += "y" * (size - overhead - len(body.encode()))
    value = {"k": body}
    assert canonical_size(value) == size
    return value


PROVENANCE = Provenance(source_type="chat", source_id="m" * 900, session_id="s1")


@pytest.mark.parametrize("char", ["x", "é", "🙂"])
def test_metadata_and_provenance_at_exactly_16_kib_is_accepted(char: str) -> None:
    budget = MAX_METADATA_PROVENANCE_BYTES - canonical_size(PROVENANCE.as_dict())
    AddRequest(scope=SCOPE, content="c", metadata=_metadata_of_size(budget, char),
               provenance=PROVENANCE).validate()
    error = refused(AddRequest(scope=SCOPE, content="c", metadata=_metadata_of_size(budget + 1,
                                                                                    char),
                               provenance=PROVENANCE), "metadata")
    assert str(MAX_METADATA_PROVENANCE_BYTES) in str(error)


def test_metadata_alone_over_16_kib_is_refused() -> None:
    big = {"notes": "x" * (17 * KIB)}
    refused(AddRequest(scope=SCOPE, content="c", metadata=big), "metadata")
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", metadata=big), "metadata")


def test_metadata_over_16_kib_in_multibyte_characters_is_refused() -> None:
    # 6,000 characters, but 18,000 bytes.
    refused(AddRequest(scope=SCOPE, content="c", metadata={"k": "€" * 6000}), "metadata")


def test_metadata_and_provenance_are_counted_together() -> None:
    provenance = Provenance(*(["p" * 1000] * 6))  # ~6 KiB of provenance, each field legal
    metadata = {"k": "m" * (11 * KIB)}  # ~11 KiB of metadata
    # Each half alone fits.
    AddRequest(scope=SCOPE, content="c", metadata=metadata).validate()
    AddRequest(scope=SCOPE, content="c", provenance=provenance).validate()
    # Together they do not.
    assert canonical_size(metadata) + canonical_size(provenance.as_dict()) > 16 * KIB
    refused(AddRequest(scope=SCOPE, content="c", metadata=metadata, provenance=provenance),
            "metadata")


def test_many_small_metadata_entries_add_up() -> None:
    metadata = {f"key{i:04d}": "v" * 40 for i in range(400)}  # 400 entries, ~20 KiB
    refused(AddRequest(scope=SCOPE, content="c", metadata=metadata), "metadata")


def test_provenance_field_is_bounded() -> None:
    refused(AddRequest(scope=SCOPE, content="c", provenance=Provenance(source_id="s" * 1025)),
            "provenance.source_id")


class Opaque:
    pass


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        pytest.param({"tags": {"a", "b"}}, "metadata.tags", id="set"),
        pytest.param({"tags": frozenset({"a"})}, "metadata.tags", id="frozenset"),
        pytest.param({"blob": b"\x00\x01"}, "metadata.blob", id="bytes"),
        pytest.param({"blob": bytearray(b"x")}, "metadata.blob", id="bytearray"),
        pytest.param({"score": float("nan")}, "metadata.score", id="nan"),
        pytest.param({"score": float("inf")}, "metadata.score", id="inf"),
        pytest.param({"score": -math.inf}, "metadata.score", id="minus-inf"),
        pytest.param({"thing": Opaque()}, "metadata.thing", id="object"),
        pytest.param({"thing": object()}, "metadata.thing", id="bare-object"),
        pytest.param({"when": __import__("datetime").date(2024, 1, 1)}, "metadata.when",
                     id="date"),
        pytest.param({1: "one"}, "metadata", id="int-key"),
        pytest.param({("a", "b"): 1}, "metadata", id="tuple-key"),
        pytest.param({None: 1}, "metadata", id="none-key"),
        pytest.param({"outer": {"inner": [1, {"deep": {1, 2}}]}},
                     "metadata.outer.inner[1].deep", id="nested-set"),
        pytest.param({"outer": {2: "x"}}, "metadata.outer", id="nested-int-key"),
        pytest.param({"outer": [float("nan")]}, "metadata.outer[0]", id="nan-in-list"),
    ],
)
def test_metadata_must_be_json_safe(metadata: dict[Any, Any], field: str) -> None:
    refused(AddRequest(scope=SCOPE, content="c", metadata=metadata), field)
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", metadata=metadata), field)


def test_metadata_nesting_depth_is_bounded() -> None:
    deep: Any = "leaf"
    for _ in range(40):
        deep = {"d": deep}
    with pytest.raises(MemoryValidationError) as info:
        AddRequest(scope=SCOPE, content="c", metadata={"root": deep}).validate()
    assert info.value.field is not None and info.value.field.startswith("metadata")


def test_json_safe_metadata_is_accepted() -> None:
    AddRequest(scope=SCOPE, content="c", metadata={
        "s": "ünï 🙂", "i": -(2**63), "j": 2**63 - 1, "f": 1.5e300, "b": False, "n": None,
        "l": [1, "two", [3.0], {"x": None}], "d": {"nested": {"ok": True}},
    }).validate()


@pytest.mark.parametrize("number", [2**63, -(2**63) - 1, 2**70, 10**5000],
                         ids=["2^63", "-2^63-1", "2^70", "10^5000"])
def test_integers_beyond_64_bits_are_refused(number: int) -> None:
    # Stores keep JSON integers in 64 bits (SQLite turns larger ones into lossy floats).
    refused(AddRequest(scope=SCOPE, content="c", metadata={"n": number}), "metadata.n")


def test_metadata_nested_beyond_the_depth_limit_is_refused() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(5000):
        node["k"] = {}
        node = node["k"]  # type: ignore[assignment]
    with pytest.raises(MemoryValidationError) as info:
        AddRequest(scope=SCOPE, content="c", metadata=deep)
    assert info.value.field == "metadata"


# -- lone surrogates ---------------------------------------------------------------------


def test_lone_surrogate_in_content_is_refused() -> None:
    error = refused(AddRequest(scope=SCOPE, content="hello \ud800 world"), "content")
    assert "surrogate" in str(error)
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", content="\udfff"), "content")


def test_lone_surrogate_in_key_is_refused() -> None:
    refused(AddRequest(scope=SCOPE, content="c", key="key\ud800"), "key")
    refused(GetRequest(scope=SCOPE, key="\udc00"), "key")


def test_lone_surrogate_in_metadata_value_is_refused() -> None:
    refused(AddRequest(scope=SCOPE, content="c", metadata={"k": "v\ud800"}), "metadata.k")
    refused(AddRequest(scope=SCOPE, content="c", metadata={"k": ["ok", "\ud800"]}), "metadata.k[1]")


def test_lone_surrogate_in_metadata_key_is_refused() -> None:
    refused(AddRequest(scope=SCOPE, content="c", metadata={"k\ud800": "v"}), "metadata")
    refused(AddRequest(scope=SCOPE, content="c", metadata={"outer": {"\udfff": 1}}),
            "metadata.outer")


def test_lone_surrogate_in_query_is_refused() -> None:
    refused(SearchRequest(scopes=(SCOPE,), query="dark \ud800 mode"), "query")


def test_lone_surrogate_in_provenance_is_refused() -> None:
    refused(AddRequest(scope=SCOPE, content="c", provenance=Provenance(source_id="\ud800")),
            "provenance.source_id")


def test_paired_surrogates_as_real_characters_are_fine() -> None:
    AddRequest(scope=SCOPE, content="emoji \U0001f642", key="\U0001f642",
               metadata={"\U0001f642": "\U0001f642"}).validate()


# -- page sizes ------------------------------------------------------------------------


def _paged(kind: str, limit: Any) -> Any:
    if kind == "list":
        return ListRequest(scope=SCOPE, limit=limit)
    if kind == "purge":
        return PurgeExpiredRequest(scope=SCOPE, limit=limit)
    return SearchRequest(scopes=(SCOPE,), query="query", limit=limit)


PAGED = ["list", "purge", "search"]


@pytest.mark.parametrize("kind", PAGED)
@pytest.mark.parametrize("limit", [1, 2, 50, 99, 100])
def test_page_sizes_1_to_100_are_accepted(kind: str, limit: int) -> None:
    _paged(kind, limit).validate()


@pytest.mark.parametrize("kind", PAGED)
@pytest.mark.parametrize(
    "limit",
    [0, -1, 101, 10**9, True, False, "5", 5.0, None],
    ids=["0", "-1", "101", "huge", "True", "False", "str-5", "float-5", "None"],
)
def test_bad_page_sizes_are_refused(kind: str, limit: Any) -> None:
    refused(_paged(kind, limit), "limit")


# -- other fields ----------------------------------------------------------------------


@pytest.mark.parametrize("importance", [-0.01, 1.01, 2, -1, float("nan"), float("inf"),
                                        True, "0.5"])
def test_importance_outside_0_to_1_is_refused(importance: Any) -> None:
    refused(AddRequest(scope=SCOPE, content="c", importance=importance), "importance")
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", importance=importance), "importance")


@pytest.mark.parametrize("importance", [0, 0.0, 0.5, 1, 1.0])
def test_importance_bounds_are_inclusive(importance: float) -> None:
    AddRequest(scope=SCOPE, content="c", importance=importance).validate()
    UpdateRequest(scope=SCOPE, record_id="01ABC", importance=importance).validate()


def test_get_needs_exactly_one_of_id_and_key() -> None:
    refused(GetRequest(scope=SCOPE), "record_id")
    refused(GetRequest(scope=SCOPE, record_id="01ABC", key="k"), "record_id")
    GetRequest(scope=SCOPE, record_id="01ABC").validate()
    GetRequest(scope=SCOPE, key="k").validate()


@pytest.mark.parametrize("record_id", ["", "  ", "*", "a\x00", "\ud800", "x" * 257])
def test_record_ids_are_identifiers(record_id: str) -> None:
    refused(GetRequest(scope=SCOPE, record_id=record_id), "record_id")
    refused(DeleteRequest(scope=SCOPE, record_id=record_id), "record_id")
    refused(HistoryRequest(scope=SCOPE, record_id=record_id), "record_id")
    refused(UpdateRequest(scope=SCOPE, record_id=record_id), "record_id")


def test_search_over_two_tenants_is_refused() -> None:
    error = refused(SearchRequest(scopes=(Scope("acme"), Scope("globex")), query="q"), "scopes")
    assert "tenant" in str(error)
    # Several scopes of one tenant are fine.
    SearchRequest(scopes=(Scope("acme"), Scope("acme", user_id="u")), query="q").validate()


def test_search_scope_count_is_bounded() -> None:
    refused(SearchRequest(scopes=(), query="q"), "scopes")
    many = tuple(Scope("acme", run_id=f"r{i}") for i in range(17))
    refused(SearchRequest(scopes=many, query="q"), "scopes")
    SearchRequest(scopes=many[:16], query="q").validate()


def test_query_limits() -> None:
    refused(SearchRequest(scopes=(SCOPE,), query=""), "query")
    refused(SearchRequest(scopes=(SCOPE,), query="   "), "query")
    SearchRequest(scopes=(SCOPE,), query="é" * 2048).validate()  # 4 KiB exactly
    refused(SearchRequest(scopes=(SCOPE,), query="é" * 2048 + "a"), "query")


def test_metadata_filter_compares_scalars() -> None:
    refused(SearchRequest(scopes=(SCOPE,), query="q", metadata_filter={"tags": ["a"]}),
            "metadata_filter.tags")
    refused(SearchRequest(scopes=(SCOPE,), query="q", metadata_filter={"d": {"a": 1}}),
            "metadata_filter.d")
    refused(SearchRequest(scopes=(SCOPE,), query="q", metadata_filter={"n": float("nan")}),
            "metadata_filter.n")
    SearchRequest(scopes=(SCOPE,), query="q", metadata_filter={"lang": "en", "n": 2,
                                                               "ok": True}).validate()


def test_entity_ids_are_bounded_identifiers() -> None:
    refused(AddRequest(scope=SCOPE, content="c", entity_ids=tuple(f"e{i}" for i in range(65))),
            "entity_ids")
    AddRequest(scope=SCOPE, content="c", entity_ids=tuple(f"e{i}" for i in range(64))).validate()
    refused(AddRequest(scope=SCOPE, content="c", entity_ids=("ok", "*")), "entity_ids[1]")


def test_idempotency_key_is_bounded() -> None:
    AddRequest(scope=SCOPE, content="c", idempotency_key="k" * 256).validate()
    refused(AddRequest(scope=SCOPE, content="c", idempotency_key="k" * 257), "idempotency_key")
    refused(DeleteRequest(scope=SCOPE, record_id="01ABC", idempotency_key="é" * 129),
            "idempotency_key")


@pytest.mark.parametrize("name", ["valid_from", "invalid_at", "expires_at"])
@pytest.mark.parametrize("value", [-1, float("nan"), "2024-01-01", True])
def test_times_are_non_negative_epoch_seconds(name: str, value: Any) -> None:
    refused(AddRequest(scope=SCOPE, content="c", **{name: value}), name)


def test_update_cannot_both_set_and_clear_expiry() -> None:
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", expires_at=10.0, clear_expires_at=True),
            "expires_at")


def test_new_records_are_active_or_pending_review() -> None:
    AddRequest(scope=SCOPE, content="c", status=RecordStatus.PENDING_REVIEW).validate()
    refused(AddRequest(scope=SCOPE, content="c", status=RecordStatus.DELETED), "status")
    refused(AddRequest(scope=SCOPE, content="c", status=RecordStatus.SUPERSEDED), "status")


def test_delete_user_ids_are_identifiers() -> None:
    refused(DeleteUserRequest(tenant_id="*", user_id="alice"), "tenant_id")
    refused(DeleteUserRequest(tenant_id="acme", user_id=""), "user_id")
    DeleteUserRequest(tenant_id="acme", user_id="alice").validate()


@pytest.mark.parametrize("name", ["valid_from", "invalid_at", "expires_at"])
def test_infinite_time_is_refused(name: str) -> None:
    request = AddRequest(scope=SCOPE, content="c", idempotency_key="k", **{name: float("inf")})
    try:
        request.validate()
    except MemoryValidationError as exc:
        assert exc.field == name
        return
    request.fingerprint()  # shows the consequence: a raw ValueError, not a validation error
    pytest.fail("infinite time accepted")


# -- cursors ---------------------------------------------------------------------------


@pytest.mark.parametrize("position", ["", "01ABC", "ünï/🙂", "a" * 300, '{"json": [1]}'])
def test_cursor_round_trip(position: str) -> None:
    cursor = encode_cursor("list", SCOPE.scope_hash, position)
    assert cursor.startswith("c1.")
    assert cursor.isascii()
    assert decode_cursor(cursor, "list", SCOPE.scope_hash) == position
    ListRequest(scope=SCOPE, cursor=cursor).validate()


def test_cursor_for_another_scope_is_refused() -> None:
    cursor = encode_cursor("list", SCOPE.scope_hash, "01ABC")
    with pytest.raises(MemoryValidationError) as info:
        decode_cursor(cursor, "list", Scope("acme", user_id="bob").scope_hash)
    assert info.value.field == "cursor"
    with pytest.raises(MemoryValidationError):
        decode_cursor(cursor, "list", Scope("acme").scope_hash)


def test_cursor_for_another_kind_is_refused() -> None:
    cursor = encode_cursor("list", SCOPE.scope_hash, "01ABC")
    with pytest.raises(MemoryValidationError) as info:
        decode_cursor(cursor, "purge_expired", SCOPE.scope_hash, field="after")
    assert info.value.field == "after"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "abc",
        "",
        "c1.",
        "c1.!!!",
        "c1.a",
        "c2." + _b64(b'{"k":"list","s":"x","p":"y"}'),
        "c1." + _b64(b"[1, 2]"),
        "c1." + _b64(b'"a string"'),
        "c1." + _b64(b"42"),
        "c1." + _b64(b"null"),
        "c1." + _b64(b"not json"),
        "c1." + _b64(b"\xff\xfe\x00"),
        "c1." + _b64(b'{"k":"list","p":"y"}'),
        "c1." + _b64(b'{"k":"list","s":"x","p":1}'),
        "c1." + _b64(b'{"k":"list","s":"x","p":"y","extra":"z"}'),
    ],
    ids=lambda c: repr(c)[:40],
)
def test_garbage_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(MemoryValidationError) as info:
        decode_cursor(cursor, "list", SCOPE.scope_hash)
    assert info.value.field == "cursor"


def test_cursor_text_is_bounded_in_requests() -> None:
    refused(ListRequest(scope=SCOPE, cursor=""), "cursor")
    refused(ListRequest(scope=SCOPE, cursor="c" * 2049), "cursor")
    refused(PurgeExpiredRequest(scope=SCOPE, after="\ud800"), "after")


@pytest.mark.parametrize("name", ["valid_from", "invalid_at", "expires_at"])
@pytest.mark.parametrize("value", [1e300, 253_402_300_800.0, float(2**63)])
def test_times_past_the_year_9999_are_not_dates(name: str, value: float) -> None:
    refused(AddRequest(scope=SCOPE, content="c", **{name: value}), name)
    AddRequest(scope=SCOPE, content="c",
               **{name: 253_402_300_799.0}).validate()  # the last second is fine


@pytest.mark.parametrize(("valid_from", "invalid_at"), [(10.0, 5.0), (7.0, 7.0)])
def test_a_validity_interval_must_not_be_empty(valid_from: float, invalid_at: float) -> None:
    refused(AddRequest(scope=SCOPE, content="c", valid_from=valid_from, invalid_at=invalid_at),
            "valid_from")
    AddRequest(scope=SCOPE, content="c", valid_from=5.0, invalid_at=10.0).validate()


def test_an_update_that_changes_nothing_is_refused() -> None:
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC"), "update")
    refused(UpdateRequest(scope=SCOPE, record_id="01ABC", expected_revision="r1",
                          idempotency_key="k"),
            "update")
    UpdateRequest(scope=SCOPE, record_id="01ABC",
                  metadata={}).validate()  # clearing metadata is a change
    UpdateRequest(scope=SCOPE, record_id="01ABC", clear_expires_at=True).validate()


@pytest.mark.parametrize("user_id", ["%", "a%", "%alice", "*"])
def test_wildcards_are_refused_in_an_erasure(user_id: str) -> None:
    refused(DeleteUserRequest(tenant_id="acme", user_id=user_id), "user_id")
    refused(DeleteUserRequest(tenant_id=user_id, user_id="alice"), "tenant_id")


@pytest.mark.parametrize("provenance", [{"sourc": "web"}, {"source_type": 3}, ["web"], 42])
def test_provenance_is_a_provenance_or_a_mapping_of_its_fields(provenance: Any) -> None:
    with pytest.raises(MemoryValidationError) as info:
        AddRequest(scope=SCOPE, content="c", provenance=provenance)
    assert info.value.field == "provenance"
    assert AddRequest(scope=SCOPE, content="c",
                      provenance={"source_type": "web"}).provenance.source_type == "web"


@pytest.mark.parametrize("metadata_filter", [{"lang": "e\x00n"}, {"la\x00ng": "en"}])
def test_nul_in_a_metadata_filter_is_refused(metadata_filter: dict[str, str]) -> None:
    refused(SearchRequest(scopes=(SCOPE,), query="q", metadata_filter=metadata_filter),
            "metadata_filter." + next(iter(metadata_filter)))
