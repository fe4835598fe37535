"""The strict converter: lossless round trips through JSON, and errors that name paths."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryValidationError
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    HitExplanation,
    IndexState,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Page,
    Provenance,
    RecordStatus,
    SearchHit,
    SearchResult,
    SignalScore,
    VersionOperation,
    Visibility,
    content_hash,
)
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import DIMENSIONS, Scope
from hypothesis import given, settings
from hypothesis import strategies as st

# -- strategies -------------------------------------------------------------------------

IDENT_CHARS = st.characters(
    blacklist_categories=("Cs", "Cc", "Cf", "Co", "Cn", "Zl", "Zp", "Zs"),
    blacklist_characters="*%",
)
identifiers = st.text(IDENT_CHARS, min_size=1, max_size=16)
scopes = st.builds(
    Scope.from_dimensions,
    st.fixed_dictionaries({"tenant_id": identifiers},
                          optional={name: identifiers for name in DIMENSIONS[1:]}),
)
# Any unicode except lone surrogates (which are not valid UTF-8 and are refused elsewhere).
unicode_text = st.text(min_size=1, max_size=60).filter(lambda s: s.strip())
finite = st.floats(allow_nan=False, allow_infinity=False)
timestamps = st.floats(min_value=0, max_value=4e9, allow_nan=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | finite | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
metadata = st.dictionaries(st.text(max_size=12), json_values, max_size=5)
optional_text = st.none() | identifiers
provenances = st.builds(
    Provenance, source_type=optional_text, source_id=optional_text, session_id=optional_text,
    run_id=optional_text, agent_id=optional_text, operation_id=optional_text,
)


@st.composite
def records(draw: st.DrawFn) -> MemoryRecord:
    scope = draw(scopes)
    content = draw(unicode_text)
    created = draw(timestamps)
    return MemoryRecord(
        id=draw(identifiers),
        scope=scope,
        scope_hash=scope.scope_hash,
        content=content,
        memory_type=draw(st.sampled_from(MemoryType)),
        version=draw(st.integers(1, 10_000)),
        revision=draw(identifiers),
        content_hash=content_hash(content),
        status=draw(st.sampled_from(RecordStatus)),
        created_at=created,
        updated_at=created + draw(st.floats(0, 1e6)),
        key=draw(st.none() | unicode_text),
        metadata=draw(metadata),
        provenance=draw(provenances),
        visibility=draw(st.sampled_from(Visibility)),
        importance=draw(st.floats(0, 1)),
        entity_ids=tuple(draw(st.lists(identifiers, max_size=4))),
        valid_from=draw(st.none() | timestamps),
        invalid_at=draw(st.none() | timestamps),
        supersedes=draw(optional_text),
        superseded_by=draw(optional_text),
        expires_at=draw(st.none() | timestamps),
        index_state=draw(st.sampled_from(IndexState)),
    )


signal_scores = st.builds(SignalScore, name=identifiers, value=finite,
                          rank=st.integers(0, 1000), weight=finite)
explanations = st.builds(HitExplanation, signals=st.lists(signal_scores, max_size=3).map(tuple),
                         tie_break=st.text(max_size=20))
hits = st.builds(SearchHit, record=records(), score=finite, rank=st.integers(1, 100),
                 explanation=explanations)
search_results = st.builds(SearchResult, hits=st.lists(hits, max_size=2).map(tuple),
                           candidates=st.integers(0, 10_000))
versions = st.builds(MemoryVersion, record=records(),
                     operation=st.sampled_from(VersionOperation),
                     recorded_at=timestamps, operation_id=optional_text)
pages = st.builds(Page, items=st.lists(records(), max_size=2).map(tuple),
                  next_cursor=st.none() | st.text(min_size=1, max_size=30))
principals = st.builds(
    Principal,
    principal_id=identifiers,
    kind=st.sampled_from(PrincipalKind),
    tenant_id=identifiers,
    user_id=optional_text,
    permissions=st.frozensets(st.sampled_from(Permission)),
)
capabilities = st.builds(
    Capabilities,
    **{f.name: st.booleans() for f in attrs.fields(Capabilities) if f.type in (bool, "bool")},
    max_page_size=st.integers(1, 100),
)
receipts = st.builds(
    ErasureReceipt,
    request_id=identifiers,
    tenant_id=identifiers,
    user_id=identifiers,
    counts=st.dictionaries(identifiers, st.integers(0, 10**6), max_size=4),
    scope_hashes=st.lists(scopes.map(lambda s: s.scope_hash), max_size=3).map(tuple),
    started_at=timestamps,
    completed_at=timestamps,
)


def json_round_trip(value: Any) -> Any:
    return json.loads(json.dumps(value))


def assert_round_trip(value: Any, kind: Any) -> None:
    data = unstructure(value)
    assert json_round_trip(data) == data, "the unstructured form must survive JSON unchanged"
    assert structure(data, kind) == value
    assert structure(json_round_trip(data), kind) == value


# -- round trips ------------------------------------------------------------------------


@given(record=records())
def test_record_round_trip(record: MemoryRecord) -> None:
    assert_round_trip(record, MemoryRecord)
    back = structure(json_round_trip(unstructure(record)), MemoryRecord)
    assert back.scope.scope_hash == record.scope_hash
    assert type(back.memory_type) is MemoryType
    assert type(back.status) is RecordStatus
    assert isinstance(back.entity_ids, tuple)


def test_record_unstructured_shape() -> None:
    scope = Scope("acme", user_id="alice")
    record = MemoryRecord(
        id="01J", scope=scope, scope_hash=scope.scope_hash, content="ünïcode 🙂",
        memory_type=MemoryType.PREFERENCE, version=3, revision="r1",
        content_hash=content_hash("ünïcode 🙂"), status=RecordStatus.ACTIVE,
        created_at=1.5, updated_at=2.5, metadata={"a": [1, {"b": None}]},
        entity_ids=("e1", "e2"),
    )
    data = unstructure(record)
    # A scope unstructures to its set dimensions only; enums to their values.
    assert data["scope"] == {"tenant_id": "acme", "user_id": "alice"}
    assert data["memory_type"] == "preference"
    assert data["status"] == "active"
    assert data["index_state"] == "indexed"
    assert data["metadata"] == {"a": [1, {"b": None}]}
    assert data["entity_ids"] == ["e1", "e2"]
    assert json.dumps(data, ensure_ascii=False)  # plain JSON, nothing exotic
    assert_round_trip(record, MemoryRecord)


@settings(max_examples=30, deadline=None)
@given(version=versions)
def test_version_round_trip(version: MemoryVersion) -> None:
    assert_round_trip(version, MemoryVersion)


@settings(max_examples=30, deadline=None)
@given(page=pages)
def test_page_round_trip(page: Page[MemoryRecord]) -> None:
    assert_round_trip(page, Page[MemoryRecord])


@settings(max_examples=30, deadline=None)
@given(result=search_results)
def test_search_result_round_trip(result: SearchResult) -> None:
    assert_round_trip(result, SearchResult)
    back = structure(json_round_trip(unstructure(result)), SearchResult)
    assert back.records == result.records


@settings(max_examples=30, deadline=None)
@given(hit=hits)
def test_search_hit_and_explanation_round_trip(hit: SearchHit) -> None:
    assert_round_trip(hit, SearchHit)
    assert_round_trip(hit.explanation, HitExplanation)


@given(principal=principals)
def test_principal_round_trip(principal: Principal) -> None:
    data = unstructure(principal)
    assert data["permissions"] == sorted(p.value for p in principal.permissions)
    assert_round_trip(principal, Principal)


@settings(max_examples=50, deadline=None)
@given(caps=capabilities)
def test_capabilities_round_trip(caps: Capabilities) -> None:
    assert_round_trip(caps, Capabilities)


@given(receipt=receipts)
def test_erasure_receipt_round_trip_and_seal(receipt: ErasureReceipt) -> None:
    assert not receipt.verify()  # unsealed: empty hash
    sealed = receipt.sealed()
    assert sealed.receipt_hash.startswith("sha256:")
    assert sealed.verify()
    assert_round_trip(sealed, ErasureReceipt)
    back = structure(json_round_trip(unstructure(sealed)), ErasureReceipt)
    assert back.verify()


def test_erasure_receipt_tampering_is_detected() -> None:
    receipt = ErasureReceipt(
        request_id="req-1", tenant_id="acme", user_id="alice",
        counts={"records": 3, "versions": 7}, scope_hashes=(Scope("acme").scope_hash,),
        started_at=10.0, completed_at=11.0,
    ).sealed()
    assert receipt.verify()
    assert receipt.total == 3
    assert not attrs.evolve(receipt, counts={"records": 2, "versions": 7}).verify()
    assert not attrs.evolve(receipt, counts={"records": 3}).verify()
    assert not attrs.evolve(receipt, user_id="bob").verify()
    assert not attrs.evolve(receipt, completed_at=12.0).verify()
    # Editing the stored JSON is caught after structuring it back.
    data = json_round_trip(unstructure(receipt))
    data["counts"]["records"] = 0
    assert not structure(data, ErasureReceipt).verify()


def test_small_results_round_trip() -> None:
    assert_round_trip(DeleteResult("id1", Scope("a").scope_hash, False, 2, "r2"), DeleteResult)
    assert_round_trip(DeleteResult("id1", Scope("a").scope_hash, True), DeleteResult)
    assert_round_trip(CleanupPage(5, "c1.xyz"), CleanupPage)
    assert_round_trip(HealthStatus(True, "native", "fine", 1.25), HealthStatus)


SCOPE = Scope("acme", project_id="support", user_id="alice")
OTHER = Scope("acme", project_id="support")

REQUESTS = [
    AddRequest(scope=SCOPE, content="hello"),
    AddRequest(
        scope=SCOPE, content="ünïcode 🙂 content", memory_type=MemoryType.DECISION, key="ui.thème",
        metadata={"tags": ["a", "b"], "n": 1, "f": 0.25, "nested": {"ok": True, "x": None}},
        provenance=Provenance(source_type="chat", source_id="m1", session_id="s",
                              run_id="r", agent_id="bot", operation_id="op"),
        visibility=Visibility.SHARED, importance=0.9, entity_ids=("e1", "e2"),
        valid_from=1.0, invalid_at=2.0, supersedes="01OLD", expires_at=3.0,
        idempotency_key="idem-1", status=RecordStatus.PENDING_REVIEW,
    ),
    GetRequest(scope=SCOPE, record_id="01ABC"),
    GetRequest(scope=SCOPE, key="ui.theme"),
    ListRequest(scope=SCOPE),
    ListRequest(scope=SCOPE, limit=50, cursor="c1.abc", memory_types=(MemoryType.FACT,
                                                                      MemoryType.NOTE)),
    SearchRequest(scopes=(SCOPE,), query="dark mode"),
    SearchRequest(scopes=(SCOPE, OTHER), query="q", limit=7, memory_types=(MemoryType.FACT,),
                  metadata_filter={"lang": "en", "n": 2},
                  entity_ids=("e1",)),
    UpdateRequest(scope=SCOPE, record_id="01ABC", importance=0.3),
    UpdateRequest(scope=SCOPE, record_id="01ABC", expected_revision="r1", content="new",
                  memory_type=MemoryType.FACT, metadata={"a": 1}, importance=0.1,
                  visibility=Visibility.PRIVATE, entity_ids=(), expires_at=None,
                  clear_expires_at=True, invalid_at=5.0, idempotency_key="k"),
    UpdateRequest(scope=SCOPE, record_id="01ABC", metadata={}),
    DeleteRequest(scope=SCOPE, record_id="01ABC"),
    DeleteRequest(scope=SCOPE, record_id="01ABC", expected_revision="r1", hard=True,
                  idempotency_key="k"),
    HistoryRequest(scope=SCOPE, record_id="01ABC"),
    DeleteAllRequest(scope=SCOPE),
    DeleteUserRequest(tenant_id="acme", user_id="alice"),
    PurgeExpiredRequest(scope=SCOPE),
    PurgeExpiredRequest(scope=SCOPE, limit=10, after="c1.after"),
]


def test_every_request_class_is_covered() -> None:
    kinds = {type(r) for r in REQUESTS}
    assert kinds == {AddRequest, GetRequest, ListRequest, SearchRequest, UpdateRequest,
                     DeleteRequest, HistoryRequest, DeleteAllRequest, DeleteUserRequest,
                     PurgeExpiredRequest}


@pytest.mark.parametrize("request_value", REQUESTS,
                         ids=lambda r: type(r).__name__)
def test_request_round_trip(request_value: Any) -> None:
    request_value.validate()
    assert_round_trip(request_value, type(request_value))
    back = structure(json_round_trip(unstructure(request_value)), type(request_value))
    back.validate()
    assert back.fingerprint() == request_value.fingerprint()


def test_update_request_distinguishes_no_metadata_from_empty_metadata() -> None:
    keep = structure(json_round_trip(unstructure(UpdateRequest(scope=SCOPE, record_id="id"))),
                     UpdateRequest)
    clear = structure(json_round_trip(unstructure(UpdateRequest(scope=SCOPE, record_id="id",
                                                                metadata={}))),
                      UpdateRequest)
    assert keep.metadata is None
    assert clear.metadata is not None and dict(clear.metadata) == {}


def test_fingerprint_ignores_idempotency_key_but_not_content() -> None:
    a = AddRequest(scope=SCOPE, content="x", idempotency_key="k1")
    assert a.fingerprint() == AddRequest(scope=SCOPE, content="x",
                                         idempotency_key="k2").fingerprint()
    assert a.fingerprint() != AddRequest(scope=SCOPE, content="y",
                                         idempotency_key="k1").fingerprint()
    assert a.fingerprint() != AddRequest(scope=OTHER, content="x",
                                         idempotency_key="k1").fingerprint()


def test_a_field_added_later_leaves_old_fingerprints_alone_until_it_is_set() -> None:
    """An idempotency entry stored before ``occurred_at`` existed still matches the retry
    of its request (pinned: the fingerprints 0.x stored for these two requests)."""
    alice = Scope("acme", user_id="alice")
    add = AddRequest(scope=alice, content="x")
    update = UpdateRequest(scope=alice, record_id="r1", content="y")
    assert add.fingerprint() == (
        "sha256:9ea18695e0548fdf30de24e85aa113667f277200fdd988223940258388f75a6c")
    assert update.fingerprint() == (
        "sha256:2f4a17720cc91bff13dd8f24d810c785ef53fc020a99f5b1a678463e3b9c970d")
    assert attrs.evolve(add, occurred_at=5.0).fingerprint() != add.fingerprint()
    assert attrs.evolve(update, occurred_at=5.0).fingerprint() != update.fingerprint()


# -- strictness -------------------------------------------------------------------------


def _record_data() -> dict[str, Any]:
    scope = Scope("acme", user_id="alice")
    return unstructure(MemoryRecord(
        id="01J", scope=scope, scope_hash=scope.scope_hash, content="c",
        memory_type=MemoryType.FACT, version=1, revision="r1", content_hash=content_hash("c"),
        status=RecordStatus.ACTIVE, created_at=1.0, updated_at=1.0,
    ))


def _refused(data: Any, kind: Any) -> MemoryValidationError:
    with pytest.raises(MemoryValidationError) as info:
        structure(data, kind)
    return info.value


@pytest.mark.parametrize(
    ("change", "path"),
    [
        pytest.param({"surprise": 1}, "MemoryRecord", id="unknown-key"),
        pytest.param({"version": "1"}, "MemoryRecord.version", id="str-for-int"),
        pytest.param({"version": True}, "MemoryRecord.version", id="bool-for-int"),
        pytest.param({"version": 1.0}, "MemoryRecord.version", id="float-for-int"),
        pytest.param({"content": 1}, "MemoryRecord.content", id="int-for-str"),
        pytest.param({"key": 1}, "MemoryRecord.key", id="int-for-optional-str"),
        pytest.param({"created_at": "1"}, "MemoryRecord.created_at", id="str-for-float"),
        pytest.param({"created_at": True}, "MemoryRecord.created_at", id="bool-for-float"),
        pytest.param({"expires_at": "5"}, "MemoryRecord.expires_at",
                     id="str-for-optional-float"),
        pytest.param({"memory_type": "recipe"}, "MemoryRecord.memory_type", id="bad-enum"),
        pytest.param({"memory_type": 1}, "MemoryRecord.memory_type", id="int-for-enum"),
        pytest.param({"status": "ACTIVE"}, "MemoryRecord.status", id="enum-name-not-value"),
        pytest.param({"metadata": [1, 2]}, "MemoryRecord.metadata", id="list-for-mapping"),
        pytest.param({"provenance": {"source": "x"}}, "MemoryRecord.provenance",
                     id="unknown-nested-key"),
        pytest.param({"scope": {"tenant_id": "acme", "planet": "mars"}}, "MemoryRecord.scope",
                     id="unknown-scope-dimension"),
        pytest.param({"scope": {"user_id": "alice"}}, "MemoryRecord.scope", id="scope-no-tenant"),
        pytest.param({"scope": {"tenant_id": "*"}}, "MemoryRecord.scope", id="scope-wildcard"),
        pytest.param({"scope": {"tenant_id": 7}}, "MemoryRecord.scope", id="scope-int-value"),
        pytest.param({"scope": "acme"}, "MemoryRecord.scope", id="scope-not-a-mapping"),
        pytest.param({"entity_ids": [1]}, "MemoryRecord.entity_ids", id="int-in-tuple"),
    ],
)
def test_record_strictness_names_the_path(change: dict[str, Any], path: str) -> None:
    error = _refused({**_record_data(), **change}, MemoryRecord)
    assert path in str(error)
    assert error.field == "MemoryRecord"


def test_unknown_key_is_named() -> None:
    assert "surprise" in str(_refused({**_record_data(), "surprise": 1}, MemoryRecord))


def test_unknown_scope_dimension_is_named() -> None:
    data = {**_record_data(), "scope": {"tenant_id": "acme", "planet": "mars"}}
    assert "planet" in str(_refused(data, MemoryRecord))


def test_missing_required_field_names_it() -> None:
    data = _record_data()
    del data["content"]
    assert "MemoryRecord.content" in str(_refused(data, MemoryRecord))


def test_bad_enum_message_lists_path() -> None:
    message = str(_refused({**_record_data(), "memory_type": "recipe"}, MemoryRecord))
    assert "memory_type" in message


def test_every_bad_path_is_reported_at_once() -> None:
    message = str(_refused({**_record_data(), "version": "1", "content": 2}, MemoryRecord))
    assert "MemoryRecord.version" in message
    assert "MemoryRecord.content" in message


def test_nested_paths_in_containers() -> None:
    page = unstructure(Page(items=(structure(_record_data(), MemoryRecord),)))
    page["items"][0]["version"] = "2"
    assert "Page.items[0].version" in str(_refused(page, Page[MemoryRecord]))

    search = unstructure(SearchRequest(scopes=(SCOPE, OTHER), query="q"))
    search["scopes"][1] = {"tenant_id": "acme", "colour": "red"}
    message = str(_refused(search, SearchRequest))
    assert "SearchRequest.scopes[1]" in message and "colour" in message

    search = unstructure(SearchRequest(scopes=(SCOPE,), query="q"))
    search["memory_types"] = ["fact", "gossip"]
    assert "SearchRequest.memory_types[1]" in str(_refused(search, SearchRequest))


@pytest.mark.parametrize(
    ("kind", "data", "path"),
    [
        (Principal, {"principal_id": "p", "kind": "robot", "tenant_id": "t"}, "Principal.kind"),
        (Principal, {"principal_id": "p", "kind": "user", "tenant_id": "t",
                     "permissions": ["memory:fly"]}, "Principal.permissions[0]"),
        (Principal, {"principal_id": "p", "kind": "user", "tenant_id": 1}, "Principal.tenant_id"),
        (Capabilities, {"durable": 1, "transactional": True}, "Capabilities.durable"),
        (Capabilities, {"durable": True, "transactional": True, "max_page_size": "100"},
         "Capabilities.max_page_size"),
        (ErasureReceipt, {"request_id": "r", "tenant_id": "t", "user_id": "u",
                          "counts": {"records": "3"}, "scope_hashes": [], "started_at": 1,
                          "completed_at": 2}, "ErasureReceipt.counts"),
        (DeleteRequest, {"scope": {"tenant_id": "a"}, "record_id": "x", "hard": 1},
         "DeleteRequest.hard"),
        (ListRequest, {"scope": {"tenant_id": "a"}, "limit": "5"}, "ListRequest.limit"),
        (AddRequest, {"scope": {"tenant_id": "a"}, "content": "c", "importance": "high"},
         "AddRequest.importance"),
        (AddRequest, {"scope": {"tenant_id": "a"}, "content": "c", "bogus": 1}, "AddRequest"),
        (AddRequest, {"content": "c"}, "AddRequest.scope"),
        (SearchRequest, {"scopes": [{"tenant_id": "a"}], "query": "q", "limit": True},
         "SearchRequest.limit"),
    ],
)
def test_strictness_of_other_types(kind: Any, data: dict[str, Any], path: str) -> None:
    assert path in str(_refused(data, kind))


def test_scope_structures_strictly() -> None:
    assert structure({"tenant_id": "a", "user_id": "u"}, Scope) == Scope("a", user_id="u")
    with pytest.raises(MemoryValidationError, match="planet"):
        structure({"tenant_id": "a", "planet": "x"}, Scope)
    with pytest.raises(MemoryValidationError):
        structure({"tenant_id": "a", "scope_hash": "sh1:forged"}, Scope)
    with pytest.raises(MemoryValidationError):
        structure(["a"], Scope)


def test_int_is_accepted_for_float_but_not_the_other_way() -> None:
    record = structure({**_record_data(), "created_at": 1, "importance": 1}, MemoryRecord)
    assert record.created_at == 1.0 and isinstance(record.created_at, float)
    assert isinstance(record.importance, float)


def test_string_for_a_tuple_is_refused() -> None:
    _refused({**_record_data(), "entity_ids": "abc"}, MemoryRecord)


def test_null_for_a_required_mapping_is_refused() -> None:
    _refused({**_record_data(), "metadata": None}, MemoryRecord)


def test_tuple_nested_in_metadata_survives_json() -> None:
    request = AddRequest(scope=SCOPE, content="c", metadata={"tags": ("a", "b")})
    request.validate()  # tuples are JSON-safe per limits.check_json_safe
    assert_round_trip(request, AddRequest)
