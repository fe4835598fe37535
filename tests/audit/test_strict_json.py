"""Every JSON text the audit code reads goes through one strict reader: a duplicate key at
any depth, NaN, a byte order mark, a number spelled otherwise than the canonical form
spells it or data after the value are refused, naming the document and (for a
duplicate) the key and its object; each reader raises its own family's error (a
``ProofError``, a ``ChainFormatError``) of the reader's type. Issue 28: an event with
``"outcome":"deny",`` prepended verified as the recorded event."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from audit_support import dup, files_in, rewrite
from governed_memory.audit import (
    AuditChainError,
    AuditSink,
    Checkpoint,
    DuplicateKeyError,
    JsonDocumentError,
    iter_entries,
    prove_inclusion,
    read_json,
    tree_checkpoint_of,
    verify_trail,
)
from governed_memory.audit.chain import (
    ChainDuplicateKeyError,
    ChainFormatError,
    canonical_bytes,
    parse_line,
)
from governed_memory.audit.proofs import (
    ConsistencyProof,
    InclusionProof,
    KeyFileError,
    ProofDocumentError,
    ProofDuplicateKeyError,
    ProofError,
    TreeCheckpoint,
    load_document,
    load_event,
    verify_inclusion,
)
from governed_memory.audit.strict_json import read_canonical_json
from governed_memory.audit.verify import TrailProblemError, checkpoint_of
from governed_memory.events import ErasureEvidence, MemoryEvent

ENTRIES = 6


def _event(n: int) -> MemoryEvent:
    """An erasure event: its ``erasure.counts`` is an object two levels down."""
    return MemoryEvent(event_id=f"evt_{n}.3", type="memory.write.committed",
                       occurred_at=1_700_000_000.0 + n,
                       operation_id=f"op_{n}", operation="delete_user", principal_id="svc:dpo",
                       tenant_id="acme", outcome="committed",
                       record_ids=(f"REC{n}",), count=1,
                       erasure=ErasureEvidence(f"req_{n}", {"records": 1, "versions": 2},
                                               1.0, 2.0, "sha256:" + "ab" * 32))


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trail")

    async def write() -> None:
        sink = AuditSink(directory)
        for n in range(ENTRIES):
            await sink.emit(_event(n))
        await sink.close()

    asyncio.run(write())
    return directory


@pytest.fixture(scope="module")
def documents(trail: Path) -> dict[str, bytes]:
    checkpoint = tree_checkpoint_of([trail], 1_800_000_000.0)
    proof, event = prove_inclusion([trail], "evt_3.3", checkpoint)
    consistency = ConsistencyProof(checkpoint.chain_id, 0, checkpoint.tree_size, ())
    return {"event": event, "proof": proof.to_json().encode(),
            "checkpoint": checkpoint.to_json().encode(),
            "consistency": consistency.to_json().encode(),
            "head": checkpoint_of([trail], 1_800_000_000.0).to_json().encode()}


# -- the reader ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "key", "where"), [
    ('{"a":1,"a":2}', "a", "$"),
    ('{"a":{"b":[{"c":1,"c":1}]}}', "c", "$.a.b[0]"),
    ('{"outcom\\u0065":"deny","outcome":"committed"}', "outcome", "$"),
    ('{"odd key":{"k":1,"k":2}}', "k", '$["odd key"]'),
    ('[0,{"k":{"x":null,"x":null}}]', "x", "$[1].k"),
])
def test_a_duplicate_key_is_refused_at_any_depth_naming_it(text: str, key: str,
                                                           where: str) -> None:
    with pytest.raises(DuplicateKeyError) as refused:
        read_json(text, "doc.json")
    assert (refused.value.key, refused.value.where, refused.value.document) == (
        key, where, "doc.json")
    assert refused.value.code == "duplicate_key"
    assert str(refused.value).startswith(f"doc.json: duplicate key {json.dumps(key)} in ")


@pytest.mark.parametrize(("text", "code", "why"), [
    (b'{"a":NaN}', "non_canonical_json", "NaN is not JSON"),
    (b'{"a":-Infinity}', "non_canonical_json", "-Infinity is not JSON"),
    (b'{"a":1e400}', "non_canonical_json", "beyond a double"),
    (b'{"a":1E2}', "non_canonical_json", "not written as the canonical form"),
    (b'{"a":1.0000000000000001}', "non_canonical_json", "(1.0)"),
    (b'{"a":-0}', "non_canonical_json", "-0"),
    (b'\xef\xbb\xbf{"a":1}', "non_canonical_json", "byte order mark"),
    ('\ufeff{"a":1}', "non_canonical_json", "byte order mark"),
    (b'{"a":1}\n{"a":2}', "non_canonical_json", "data after the JSON value"),
    (b'{"a":1} x', "non_canonical_json", "data after the JSON value"),
    ('{"a":1}'.encode("utf-16"), "invalid_json", "not UTF-8"),
    (b"{not json", "invalid_json", "not JSON"),
    (b"[" * 100_000, "invalid_json", "nested too deeply"),
    (b"1" * 5000, "invalid_json", "more digits"),
])
def test_json_no_canonical_writer_produces_is_refused(text: bytes | str, code: str,
                                                      why: str) -> None:
    with pytest.raises(JsonDocumentError) as refused:
        read_json(text, "doc.json")
    assert type(refused.value) is JsonDocumentError and refused.value.code == code
    assert why in str(refused.value) and str(refused.value).startswith("doc.json: ")


def test_what_the_canonical_form_writes_is_read_in_any_layout() -> None:
    value = {"b": [1, -2, 1.5, -0.0, 1e+23, 1700000000.25, None, True], "a": {"é": "\u2028"}}
    canonical = canonical_bytes(value)
    assert read_json(canonical, "doc") == value
    assert read_json(json.dumps(value, indent=2, ensure_ascii=False), "doc") == value
    assert read_json(canonical + b"\n  \n", "doc") == value
    assert read_canonical_json(canonical, "doc", edited="edited") == value
    with pytest.raises(JsonDocumentError, match="doc: edited") as spaced:
        read_canonical_json(json.dumps(value).encode(), "doc", edited="edited")
    assert spaced.value.code == "non_canonical_json"
    with pytest.raises(DuplicateKeyError):
        read_canonical_json(dup(canonical, b'{"a":{', b'"\\u00e9":0,'), "doc", edited="x")


# -- every document kind, in Python -------------------------------------------------------------


def test_an_event_with_a_duplicate_key_never_verifies(documents: dict[str, bytes]) -> None:
    proof = InclusionProof.from_json(documents["proof"])
    checkpoint = TreeCheckpoint.from_json(documents["checkpoint"])
    event = documents["event"]
    verify_inclusion(event, proof, checkpoint)  # the genuine one does
    for tampered, key, where in [
            (dup(event, b"{", b'"outcome":"deny",'), "outcome", "$"),  # issue 28
            (dup(event, b'"counts":{', b'"records":0,'), "records", "$.erasure.counts"),
            (dup(event, b'"erasure":{', b'"request_id":"req_9",'), "request_id",
             "$.erasure")]:
        with pytest.raises(ProofDuplicateKeyError) as refused:
            verify_inclusion(tampered, proof, checkpoint)
        assert isinstance(refused.value, ProofError) and isinstance(refused.value,
                                                                    DuplicateKeyError)
        assert (refused.value.key, refused.value.where) == (key, where)
        with pytest.raises(ProofDuplicateKeyError, match=r"^event\.json: duplicate key"):
            load_event(tampered, source="event.json")
    for tampered in (event.replace(b'"count":1', b'"count":1.0E0'),
                     event.replace(b'"count":1', b'"count":NaN'), event + b"{}"):
        with pytest.raises(ProofDocumentError) as non_canonical:
            verify_inclusion(tampered, proof, checkpoint)
        assert non_canonical.value.code == "non_canonical_json"


@pytest.mark.parametrize("kind", ["proof", "checkpoint", "consistency"])
def test_a_proof_or_checkpoint_with_a_duplicate_key_is_refused(
        documents: dict[str, bytes], kind: str) -> None:
    text = documents[kind]
    first_key = text[2:text.index(b'"', 2)]
    load = {"proof": InclusionProof.from_json, "checkpoint": TreeCheckpoint.from_json,
            "consistency": ConsistencyProof.from_json}[kind]
    for tampered, where in [(dup(text, b"{", b'"' + first_key + b'":null,'), "$"),
                            (dup(text, b"{", b'"note":{"k":1,"k":2},'), "$.note")]:
        for read in (lambda t: load(t, source=f"{kind}.json"),
                     lambda t: load_document(t, source=f"{kind}.json")):
            with pytest.raises(ProofDuplicateKeyError) as refused:
                read(tampered)
            assert refused.value.where == where and refused.value.document == f"{kind}.json"


def test_a_head_only_checkpoint_is_read_strictly(documents: dict[str, bytes]) -> None:
    head = documents["head"]
    assert Checkpoint.from_json(head) == Checkpoint.from_json(
        json.dumps(json.loads(head), indent=1))  # any layout
    for tampered in (dup(head, b"{", b'"count":0,'), dup(head, b"{", b'"x":{"k":1,"k":2},')):
        with pytest.raises(ChainDuplicateKeyError) as refused:
            Checkpoint.from_json(tampered, source="cp.jsonl:1")
        assert isinstance(refused.value, ChainFormatError)
        assert str(refused.value).startswith("cp.jsonl:1: duplicate key")
    body = json.loads(head)
    for field, value in [("count", "6"), ("count", 6.0), ("count", True), ("count", -1),
                         ("created_at", "1"), ("head", "AB" * 32), ("chain_id", 7)]:
        with pytest.raises(ChainFormatError, match="checkpoint needs"):
            Checkpoint.from_json(json.dumps({**body, field: value}))
    with pytest.raises(ChainFormatError, match="fields"):
        Checkpoint.from_json(json.dumps({**body, "extra": 1}))


def _tampered_trail(source: Path, target: Path, entry: int, after: bytes,
                    member: bytes) -> Path:
    shutil.copytree(source, target)
    (first,) = files_in(target)
    lines = first.read_bytes().splitlines()
    lines[entry] = dup(lines[entry], after, member)
    rewrite(first, lines)
    return target


@pytest.mark.parametrize(("after", "member", "key", "where"), [
    (b"{", b'"seq":1,', "seq", "$"),
    (b'{"event":{', b'"outcome":"deny",', "outcome", "$.event"),
    (b'"counts":{', b'"records":0,', "records", "$.event.erasure.counts"),
])
def test_a_trail_line_with_a_duplicate_key_breaks_the_trail(
        trail: Path, tmp_path: Path, after: bytes, member: bytes, key: str,
        where: str) -> None:
    line = files_in(trail)[0].read_bytes().splitlines()[4]
    with pytest.raises(ChainDuplicateKeyError) as refused:
        parse_line(dup(line, after, member))
    assert (refused.value.key, refused.value.where) == (key, where)

    tampered = _tampered_trail(trail, tmp_path / "trail", 4, after, member)
    problem = verify_trail([tampered]).problem
    assert problem is not None and problem.kind == "broken" and problem.line == 5
    place = "the top-level object" if where == "$" else f"the object at {where}"
    assert f"duplicate key {json.dumps(key)} in {place}" in problem.reason
    with pytest.raises(TrailProblemError, match="duplicate key"):
        tree_checkpoint_of([tampered], 0.0)
    with pytest.raises(TrailProblemError, match="duplicate key"):
        checkpoint_of([tampered], 0.0)
    # an unverified read passes the line over rather than read it one way of several
    assert [e.event["event_id"] for e in iter_entries([tampered])] == [
        f"evt_{n}.3" for n in range(ENTRIES) if n != 3]

    async def append() -> None:
        sink = AuditSink(tampered)
        await sink.emit(_event(99))

    with pytest.raises(AuditChainError, match="duplicate key"):
        asyncio.run(append())


def test_proving_the_tampered_event_names_the_duplicate(trail: Path, tmp_path: Path) -> None:
    checkpoint = tree_checkpoint_of([trail], 0.0)
    tampered = _tampered_trail(trail, tmp_path / "trail", 4, b'{"event":{',
                               b'"outcome":"deny",')
    with pytest.raises(TrailProblemError, match='duplicate key "outcome"'):
        prove_inclusion([tampered], "evt_3.3", checkpoint)


def test_a_key_file_of_two_keys_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    from governed_memory.audit.signing import (
        generate_key_pair,
        load_private_key,
        load_public_key_file,
    )

    for name in ("a", "b"):
        generate_key_pair(tmp_path / f"{name}.pem", tmp_path / f"{name}.pub")
    both = tmp_path / "both.pub"
    both.write_bytes((tmp_path / "b.pub").read_bytes() + (tmp_path / "a.pub").read_bytes())
    with pytest.raises(KeyFileError, match=r"both\.pub: holds 2 PEM blocks"):
        load_public_key_file(both)
    private = tmp_path / "both.pem"
    private.write_bytes((tmp_path / "a.pem").read_bytes() + (tmp_path / "b.pem").read_bytes())
    private.chmod(0o600)
    with pytest.raises(KeyFileError, match=r"both\.pem: holds 2 PEM blocks") as refused:
        load_private_key(private)
    assert "PRIVATE KEY" not in str(refused.value)
    load_public_key_file(tmp_path / "a.pub")
    load_private_key(tmp_path / "a.pem")
