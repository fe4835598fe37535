"""Signed notes, verifier keys, cosignatures and tlog-checkpoint bodies (the C2SP formats)
on their own: public vectors made by others verify (the signed-note spec's example, and
a real checkpoint of a public log cosigned by a public witness), every spelling the
specs do not allow is refused, and tampering with text, signature, key or timestamp is
refused with the project's proof errors."""

from __future__ import annotations

import base64
import hashlib
import struct

import attrs
import pytest
from c2sp_support import (
    REAL_CHECKPOINT,
    REAL_LOG_VKEY,
    REAL_WITNESS_VKEY,
    SPEC_NOTE,
    SPEC_VKEY,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from governed_memory.audit.checkpoint_notes import (
    LogCheckpoint,
    checkpoint_note,
    default_origin,
    log_verifier_key,
    read_checkpoint_note,
)
from governed_memory.audit.notes import (
    COSIGNATURE_V1,
    ED25519,
    Note,
    NoteFormatError,
    NoteSignature,
    VerifierKey,
    WitnessQuorumError,
    cosign,
    require_quorum,
    sign,
)
from governed_memory.audit.proofs import (
    BadSignatureError,
    KeyMismatchError,
    ProofError,
    RootMismatchError,
    TreeCheckpoint,
    TreeSizeError,
)
from governed_memory.audit.tree_hashing import EMPTY_ROOT

KEY = Ed25519PrivateKey.generate()
WITNESS = Ed25519PrivateKey.generate()
OTHER = Ed25519PrivateKey.generate()
TEXT = "example.org/log\n7\n" + base64.b64encode(b"\x07" * 32).decode() + "\n"


def test_the_signed_note_spec_example_verifies() -> None:
    key = VerifierKey.parse(SPEC_VKEY)
    assert (key.name, key.signature_type, key.key_id) == ("example.com/foo", ED25519,
                                                          0x530D903A)
    assert key.text() == SPEC_VKEY
    note = Note.parse(SPEC_NOTE)
    assert note.text == "This is an example message.\n"
    assert [v.key for v in note.verify([key])] == [key]
    assert note.to_bytes().decode() == SPEC_NOTE
    altered = SPEC_NOTE.replace("example message", "example massage")
    with pytest.raises(BadSignatureError):
        Note.parse(altered).verify([key])


def test_a_real_witnessed_checkpoint_verifies_with_the_log_and_witness_keys() -> None:
    note, body = read_checkpoint_note(REAL_CHECKPOINT)
    assert (body.origin, body.size) == ("arche2025h1.staging.ct.transparency.dev", 1432088532)
    log, witness = VerifierKey.parse(REAL_LOG_VKEY), VerifierKey.parse(REAL_WITNESS_VKEY)
    assert witness.signature_type == COSIGNATURE_V1
    assert [v.timestamp for v in note.verify([log])] == [None]
    (cosigned,) = require_quorum(note, [witness], 1)
    assert cosigned.timestamp == 0x6A122120  # the cosignature's own time
    # the signatures of keys not given (an RFC 6962 one, other witnesses) are ignored;
    # the same text at another size or root is refused by both keys
    for changed in (REAL_CHECKPOINT.replace("1432088532", "1432088533"),
                    REAL_CHECKPOINT.replace("U7WM", "U7WN")):
        with pytest.raises(BadSignatureError):
            Note.parse(changed).verify([log])
        with pytest.raises(BadSignatureError):
            require_quorum(Note.parse(changed), [witness], 1)


def test_key_ids_follow_the_spec() -> None:
    raw = b"\x11" * 32
    expected = int.from_bytes(hashlib.sha256(b"log.example/a\n\x01" + raw).digest()[:4], "big")
    key = VerifierKey("log.example/a", ED25519, raw)
    assert key.key_id == expected
    assert VerifierKey("log.example/a", COSIGNATURE_V1, raw).key_id != expected
    assert VerifierKey.parse(key.text()) == key
    made = log_verifier_key(KEY, "log.example/b")
    assert made == VerifierKey.of("log.example/b", KEY.public_key())
    assert made.text().startswith(f"log.example/b+{made.key_id:08x}+A")


@pytest.mark.parametrize("text", [
    pytest.param("example.com/foo+530d903a", id="two parts"),
    pytest.param("example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
                 id="wrong key id"),
    pytest.param("example.com/foo+530d903+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
                 id="short key id"),
    pytest.param("example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2", id="b64"),
    pytest.param("example.com/foo+530d903a+Aw==", id="short key"),
    pytest.param("+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", id="no name"),
    pytest.param("ex ample+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k", id="space"),
    pytest.param("example.com/foo+530d903a+BUyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
                 id="unknown type"),
])
def test_a_malformed_verifier_key_is_refused(text: str) -> None:
    with pytest.raises(NoteFormatError):
        VerifierKey.parse(text)


@pytest.mark.parametrize("data", [
    pytest.param("no blank line\n\u2014 a AAAAAAE=\n", id="no blank line"),
    pytest.param("text\n\n", id="no signature"),
    pytest.param("text\n\n\u2014 a AAAAAAE=", id="no final newline"),
    pytest.param("text\n\n- a AAAAAAE=\n", id="hyphen, not em dash"),
    pytest.param("te\txt\n\n\u2014 a AAAAAAE=\n", id="control character"),
    pytest.param("text\n\n\u2014 a AAAAAAF=\n", id="non-canonical base64"),
    pytest.param("text\n\n\u2014 a AAAA\n", id="signature too short"),
    pytest.param("text\n\n\u2014 a+b AAAAAAE=\n", id="plus in the name"),
    pytest.param("text\n\n" + "\u2014 a AAAAAAE=\n" * 101, id="too many signatures"),
    pytest.param(b"text\xff\n\n" + "\u2014 a AAAAAAE=\n".encode(), id="not UTF-8"),
])
def test_a_malformed_note_is_refused(data: str | bytes) -> None:
    with pytest.raises(NoteFormatError):
        Note.parse(data)


def test_signatures_of_unknown_keys_are_ignored_and_a_bad_known_one_refuses() -> None:
    mine = VerifierKey.of("log.example/a", KEY)
    stranger = sign(TEXT, OTHER, "someone.else")
    good = Note(TEXT, (stranger, sign(TEXT, KEY, "log.example/a")))
    assert [v.key for v in good.verify([mine])] == [mine]
    with pytest.raises(KeyMismatchError, match=r"someone\.else"):
        Note(TEXT, (stranger,)).verify([mine])
    # another key's signature under this key's name and id: a forgery, refused
    forged = attrs.evolve(sign(TEXT, OTHER, "log.example/a"), key_id=mine.key_id)
    with pytest.raises(BadSignatureError):
        Note(TEXT, (forged, *good.signatures)).verify([mine])
    # a signature of another text swapped in
    swapped = Note(TEXT, (sign(TEXT.replace("7", "8"), KEY, "log.example/a"),))
    with pytest.raises(BadSignatureError):
        swapped.verify([mine])
    # the same name, another key: its id differs, so the signature is unknown
    with pytest.raises(KeyMismatchError):
        good.verify([VerifierKey.of("log.example/a", OTHER)])


def test_a_cosignature_binds_the_time_the_text_and_the_witness_key() -> None:
    witness = VerifierKey.of("witness.example/w1", WITNESS, cosigner=True)
    line = cosign(TEXT, WITNESS, "witness.example/w1", 1_800_000_000)
    assert line.key_id == witness.key_id and len(line.signature) == 72
    assert struct.unpack(">Q", line.signature[:8]) == (1_800_000_000,)
    note = Note(TEXT, (sign(TEXT, KEY, "log.example/a"), line))
    assert [v.timestamp for v in require_quorum(note, [witness], 1)] == [1_800_000_000]
    later = struct.pack(">Q", 1_800_000_001) + line.signature[8:]
    for bad in (attrs.evolve(line, signature=later),
                cosign(TEXT.replace("7", "8"), WITNESS, "witness.example/w1", 1_800_000_000)):
        with pytest.raises(BadSignatureError):
            require_quorum(Note(TEXT, (bad,)), [witness], 1)
    # a plain signature by the witness key is no cosignature (another type, another id)
    plain = sign(TEXT, WITNESS, "witness.example/w1")
    with pytest.raises(WitnessQuorumError):
        require_quorum(Note(TEXT, (plain,)), [witness], 1)
    with pytest.raises(NoteFormatError):
        cosign(TEXT, WITNESS, "witness.example/w1", -1)


def test_a_quorum_counts_distinct_valid_witnesses() -> None:
    keys = [Ed25519PrivateKey.generate() for _ in range(3)]
    witnesses = [VerifierKey.of(f"w{i}.example", k, cosigner=True) for i, k in enumerate(keys)]
    lines = [cosign(TEXT, k, f"w{i}.example", 1_800_000_000 + i) for i, k in enumerate(keys)]
    two = Note(TEXT, (sign(TEXT, KEY, "log"), lines[0], lines[2], lines[0]))
    assert len(require_quorum(two, witnesses, 2)) == 2
    assert len(require_quorum(two, witnesses, 0)) == 2
    with pytest.raises(WitnessQuorumError, match="2 of the 3 witnesses"):
        require_quorum(two, witnesses, 3)
    with pytest.raises(NoteFormatError):
        require_quorum(two, witnesses, 4)
    with pytest.raises(NoteFormatError):
        require_quorum(two, [VerifierKey.of("log", KEY)], 1)  # not a cosigner key
    with pytest.raises(WitnessQuorumError):
        require_quorum(Note(TEXT, (sign(TEXT, KEY, "log"),)), witnesses, 1)
    added = Note(TEXT, (lines[0],)).with_signature(
        cosign(TEXT, keys[0], "w0.example", 1_900_000_000))
    assert len(added.signatures) == 1  # the witness's newer cosignature replaces its older


@pytest.mark.parametrize("text", [
    pytest.param("log\n07\n" + base64.b64encode(bytes(32)).decode() + "\n", id="leading zero"),
    pytest.param("log\n-1\n" + base64.b64encode(bytes(32)).decode() + "\n", id="negative"),
    pytest.param("log\n7\n" + base64.b64encode(bytes(31)).decode() + "\n", id="short root"),
    pytest.param("log\n7\n" + base64.b64encode(bytes(32)).decode(), id="no final newline"),
    pytest.param("log\n7\n", id="no root"),
    pytest.param("\n7\n" + base64.b64encode(bytes(32)).decode() + "\n", id="empty origin"),
    pytest.param("log\n7\n" + base64.b64encode(bytes(32)).decode() + "\n\n", id="empty ext"),
    pytest.param("log\n0\n" + base64.b64encode(bytes(32)).decode() + "\n", id="empty tree"),
])
def test_a_malformed_checkpoint_body_is_refused(text: str) -> None:
    with pytest.raises(NoteFormatError):
        LogCheckpoint.parse(text)


def test_a_trail_checkpoint_becomes_a_note_stating_the_same_tree() -> None:
    root = hashlib.sha256(b"root").digest()
    tree = TreeCheckpoint("chain_" + "ab" * 16, 5, root.hex(), "cd" * 32, 1.5)
    note = checkpoint_note(tree, KEY)
    origin = default_origin(tree.chain_id)
    assert note.text == f"{origin}\n5\n{base64.b64encode(root).decode()}\n"
    assert [s.name for s in note.signatures] == [origin]
    assert note.verify([log_verifier_key(KEY, origin)])
    body = LogCheckpoint.parse(note.text)
    body.matches(tree)
    with pytest.raises(TreeSizeError):
        body.matches(attrs.evolve(tree, tree_size=6))
    with pytest.raises(RootMismatchError):
        body.matches(attrs.evolve(tree, root="00" * 32))
    named = checkpoint_note(tree, KEY, origin="audit.example/acme", key_name="acme-log")
    assert named.text.startswith("audit.example/acme\n")
    assert named.verify([VerifierKey.of("acme-log", KEY)])
    with pytest.raises(NoteFormatError):
        checkpoint_note(tree, KEY, origin="has space")
    empty = TreeCheckpoint(tree.chain_id, 0, EMPTY_ROOT.hex(), "cd" * 32, 1.5)
    assert LogCheckpoint.parse(checkpoint_note(empty, KEY).text).size == 0
    assert LogCheckpoint.parse("log\n7\n" + base64.b64encode(root).decode()
                               + "\next one\n").extensions == ("ext one",)


def test_every_changed_byte_of_a_signed_checkpoint_note_is_refused() -> None:
    witness = VerifierKey.of("witness.example/w1", WITNESS, cosigner=True)
    log = VerifierKey.of("log.example/a", KEY)
    text = LogCheckpoint("log.example/a", 12345, hashlib.sha256(b"r").digest()).text()
    data = Note(text, (sign(text, KEY, "log.example/a"),
                       cosign(text, WITNESS, "witness.example/w1", 1_800_000_000))).to_bytes()
    refused = 0
    for position in range(len(data)):
        changed = bytearray(data)
        changed[position] ^= 0x01
        with pytest.raises(ProofError):
            note = Note.parse(bytes(changed))
            LogCheckpoint.parse(note.text)
            note.verify([log])
            require_quorum(note, [witness], 1)
        refused += 1
    assert refused == len(data)
    assert isinstance(NoteSignature("a", 1, b"x").line(), str)
