"""What the trail publishes in the C2SP formats, checked by a verifier this project did
not write: tests/audit/goverify, a small program over Go's golang.org/x/mod/sumdb/note
(signed notes) and sumdb/tlog (tiles, record and tree proofs), built from Debian's
packages. It verifies the signed checkpoints and the witnesses' cosignatures, recomputes
every tile and bundle, proves every entry, checks the project's own proof documents,
and proves the log only grew between two checkpoints; and it refuses every tampering
the project's proof tests refuse, as the project's verifier does: 0 accepted."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from audit_support import event, event_ids_in, write_trail
from c2sp_support import (
    REAL_CHECKPOINT,
    REAL_LOG_VKEY,
    REAL_WITNESS_VKEY,
    accepted,
    goverify,
    grow,
)
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from governed_memory.audit import AuditSink
from governed_memory.audit.chain import canonical_bytes
from governed_memory.audit.checkpoint_notes import LogCheckpoint, checkpoint_note
from governed_memory.audit.notes import Note, VerifierKey, cosign, require_quorum
from governed_memory.audit.proofs import (
    ConsistencyProof,
    InclusionProof,
    ProofError,
    TreeCheckpoint,
    check_consistency,
    leaf_hash,
    root_from_inclusion,
    verify_consistency,
    verify_inclusion,
)
from governed_memory.audit.proving import prove_consistency, prove_inclusion
from governed_memory.audit.tile_writer import publish_tiles
from governed_memory.audit.tiles import TileDirectory, TiledTree, check_directory
from governed_memory.audit.trail_entries import TrailEntries
from governed_memory.audit.verify import tree_checkpoint_of
from governed_memory.audit.witness import cosign_checkpoint

ORIGIN = "audit.example/go-verifier"
LOG, OTHER = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
W1, W2, W3 = (Ed25519PrivateKey.generate() for _ in range(3))
FIRST, SECOND, INDEX = 300, 700, 6


@attrs.frozen
class World:
    home: Path
    tiles: Path
    first: TreeCheckpoint
    second: TreeCheckpoint
    proof: InclusionProof
    event: bytes
    consistency: ConsistencyProof

    def path(self, name: str) -> Path:
        return self.home / name


def _note(world_home: Path, name: str, data: bytes) -> Path:
    (world_home / name).write_bytes(data)
    return world_home / name


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    home = tmp_path_factory.mktemp("c2sp")
    trail, tiles = home / "trail", home / "tiles"
    asyncio.run(write_trail(trail, FIRST))
    first = tree_checkpoint_of([trail], 1_800_000_000.0)
    note1 = checkpoint_note(first, LOG, origin=ORIGIN)
    publish_tiles(TrailEntries([trail]), tiles, note1)
    grow(trail, FIRST, SECOND)
    second = tree_checkpoint_of([trail], 1_800_000_100.0)
    note2 = checkpoint_note(second, LOG, origin=ORIGIN)
    publish_tiles(TrailEntries([trail]), tiles, note2)
    log = VerifierKey.of(ORIGIN, LOG)
    witnessed = note2
    for key, name in ((W1, "w1.example"), (W2, "w2.example")):
        state = home / f"{name}.state"
        cosign_checkpoint(note1.to_bytes(), TileDirectory(tiles), log_key=log, key=key,
                          name=name, state=state, now=1_800_000_050)
        witnessed = cosign_checkpoint(witnessed.to_bytes(), TileDirectory(tiles), log_key=log,
                                      key=key, name=name, state=state,
                                      now=1_800_000_150).note
    files = {"cp1.note": note1.to_bytes(), "cp2.note": note2.to_bytes(),
             "cp2.cosigned": witnessed.to_bytes(),
             "log.vkey": log.text().encode(),
             "other.vkey": VerifierKey.of(ORIGIN, OTHER).text().encode()}
    for number, key in enumerate((W1, W2, W3), start=1):
        files[f"w{number}.vkey"] = VerifierKey.of(f"w{number}.example", key,
                                                  cosigner=True).text().encode()
    for name, data in files.items():
        _note(home, name, data)
    wanted = event_ids_in(trail)[INDEX]
    proof, body = prove_inclusion([trail], wanted, second)
    consistency = prove_consistency([trail], first, second)
    (home / "proof.json").write_text(proof.to_json())
    (home / "event.json").write_bytes(body + b"\n")
    (home / "consistency.json").write_text(consistency.to_json())
    _rewritten_history(home / "rewritten")
    return World(home, tiles, first, second, proof, body, consistency)


def _rewritten_history(home: Path) -> None:
    """The same log (origin, key) showing another history: entry 3 differs."""
    async def write() -> None:
        sink = AuditSink(home / "trail", max_file_bytes=4096)
        for n in range(SECOND):
            await sink.emit(event(n, operation="delete") if n == 2 else event(n))
        await sink.close()

    asyncio.run(write())
    rewritten = tree_checkpoint_of([home / "trail"], 1_800_000_100.0)
    publish_tiles(TrailEntries([home / "trail"]), home / "tiles",
                  checkpoint_note(rewritten, LOG, origin=ORIGIN))


def policy(world: World, *witnesses: str, quorum: int | None = None) -> list[str]:
    args = ["-log-key", str(world.path("log.vkey"))]
    for name in witnesses:
        args += ["-witness", str(world.path(f"{name}.vkey"))]
    if quorum is not None:
        args += ["-quorum", str(quorum)]
    return args


# -- what holds verifies -----------------------------------------------------------------


def test_public_vectors_verify_with_the_independent_verifier(tmp_path: Path) -> None:
    (tmp_path / "real.note").write_text(REAL_CHECKPOINT)
    ok = goverify("note", "-log-key", REAL_LOG_VKEY, "-witness", REAL_WITNESS_VKEY,
                  tmp_path / "real.note")
    assert ok.returncode == 0, ok.stderr
    assert "remora.n621.de@" in ok.stdout and "1432088532 entries" in ok.stdout
    (tmp_path / "changed.note").write_text(REAL_CHECKPOINT.replace("1432088532", "1432088533"))
    assert not accepted("note", "-log-key", REAL_LOG_VKEY, tmp_path / "changed.note")


def test_the_signed_checkpoint_and_its_cosignatures_verify(world: World) -> None:
    done = goverify("note", *policy(world, "w1", "w2"), world.path("cp2.cosigned"))
    assert done.returncode == 0, done.stderr
    assert f"checkpoint of {ORIGIN}: {SECOND} entries" in done.stdout
    assert "w1.example@2027-01-15T08:02:30Z" in done.stdout
    root = base64.b64encode(world.second.root_bytes).decode()
    assert root in done.stdout  # the JSON checkpoint's root, read by another program
    assert accepted("note", *policy(world), world.path("cp1.note"))


def test_every_tile_and_bundle_is_recomputed_from_the_entries(world: World) -> None:
    done = goverify("tiles", "-base", world.tiles, *policy(world), "-strict")
    assert done.returncode == 0, done.stderr
    assert f"{SECOND} entries, 4 tiles and 3 entry bundles give the signed root" in done.stdout


def test_every_entry_is_proven_from_the_tiles(world: World) -> None:
    for checkpoint in ("cp2.note", "cp1.note"):  # cp1's partial tiles were replaced since
        done = goverify("inclusion", "-base", world.tiles, *policy(world), "-all",
                        "-checkpoint", world.path(checkpoint))
        assert done.returncode == 0, done.stderr
    mine = goverify("inclusion", "-base", world.tiles, *policy(world, "w1", "w2"),
                    "-checkpoint", world.path("cp2.cosigned"),
                    "-proof", world.path("proof.json"), "-entry", world.path("event.json"))
    assert mine.returncode == 0, mine.stderr
    assert f"OK entry {INDEX} " in mine.stdout and "so is the proof's path" in mine.stdout


def test_the_log_only_grew_between_the_two_checkpoints(world: World) -> None:
    done = goverify("consistency", "-base", world.tiles, *policy(world, "w1", "w2"),
                    "-old", world.path("cp1.note"), "-new", world.path("cp2.cosigned"),
                    "-proof", world.path("consistency.json"))
    assert done.returncode == 0, done.stderr
    assert f"at {SECOND} entries extends itself at {FIRST} entries" in done.stdout


# -- the tamper set ------------------------------------------------------------------------


def _write(tmp: Path, name: str, data: bytes | str) -> Path:
    path = tmp / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _refused(check: Callable[[], object]) -> bool:
    try:
        check()
    except ProofError:
        return True
    return False


def _proof_with(world: World, tmp: Path, **changes: object) -> tuple[Path, InclusionProof]:
    proof = attrs.evolve(world.proof, **changes)  # type: ignore[misc]
    return _write(tmp, "proof.json", proof.to_json()), proof


def _go_inclusion(world: World, proof: Path, entry: Path | None = None,
                  checkpoint: str = "cp2.note", base: Path | None = None,
                  key: str = "log.vkey") -> bool:
    args = ["inclusion", "-base", base or world.tiles, "-log-key", world.path(key),
            "-checkpoint", world.path(checkpoint) if "/" not in checkpoint else checkpoint,
            "-proof", proof]
    return accepted(*args, "-entry", entry or world.path("event.json"))


def _py_inclusion(world: World, proof: InclusionProof, event: bytes | None = None,
                  checkpoint: TreeCheckpoint | None = None) -> bool:
    return not _refused(lambda: verify_inclusion(event or world.event, proof,
                                                 checkpoint or world.second))


def _path_case(change: Callable[[tuple[str, ...]], tuple[str, ...]]
               ) -> Callable[[World, Path], tuple[bool, bool]]:
    def case(world: World, tmp: Path) -> tuple[bool, bool]:
        path, proof = _proof_with(world, tmp, audit_path=change(world.proof.audit_path))
        return _go_inclusion(world, path), _py_inclusion(world, proof)
    return case


def another_event(world: World, tmp: Path) -> tuple[bool, bool]:
    other = json.loads(world.event)
    other = json.loads(canonical_bytes({**other, "event_id": "evt_000007.4"}))
    body = canonical_bytes(other)
    entry = _write(tmp, "event.json", body)
    return (_go_inclusion(world, world.path("proof.json"), entry),
            _py_inclusion(world, world.proof, body))


def altered_event(world: World, tmp: Path) -> tuple[bool, bool]:
    body = canonical_bytes({**json.loads(world.event), "outcome": "denied"})
    entry = _write(tmp, "event.json", body)
    return (_go_inclusion(world, world.path("proof.json"), entry),
            _py_inclusion(world, world.proof, body))


def wrong_index(world: World, tmp: Path) -> tuple[bool, bool]:
    path, proof = _proof_with(world, tmp, leaf_index=INDEX + 1)
    return _go_inclusion(world, path), _py_inclusion(world, proof)


def index_past_the_tree(world: World, tmp: Path) -> tuple[bool, bool]:
    path, proof = _proof_with(world, tmp, leaf_index=SECOND)
    return _go_inclusion(world, path), _py_inclusion(world, proof)


def wrong_tree_size(world: World, tmp: Path) -> tuple[bool, bool]:
    path, proof = _proof_with(world, tmp, tree_size=SECOND + 1)
    older = _go_inclusion(world, world.path("proof.json"), checkpoint="cp1.note")
    return _go_inclusion(world, path) or older, _py_inclusion(world, proof) or _py_inclusion(
        world, world.proof, checkpoint=world.first)


def another_logs_checkpoint(world: World, tmp: Path) -> tuple[bool, bool]:
    foreign = checkpoint_note(world.second, LOG, origin="another.example/log").to_bytes()
    note = _write(tmp, "foreign.note", foreign)
    other = attrs.evolve(world.second, chain_id="chain_" + "77" * 16)
    return (_go_inclusion(world, world.path("proof.json"), checkpoint=str(note)),
            _py_inclusion(world, world.proof, checkpoint=other))


def _note_case(change: Callable[[World, bytes], bytes], key: str = "log.vkey"
               ) -> Callable[[World, Path], tuple[bool, bool]]:
    """A tampered checkpoint note: refused by Go (note, and inclusion against it) and by
    the project's note verifier."""
    def case(world: World, tmp: Path) -> tuple[bool, bool]:
        data = change(world, world.path("cp2.note").read_bytes())
        note = _write(tmp, "cp.note", data)
        go = (accepted("note", "-log-key", world.path(key), note)
              or _go_inclusion(world, world.path("proof.json"), checkpoint=str(note), key=key))
        log = VerifierKey.parse(world.path(key).read_text())
        return go, not _refused(lambda: Note.parse(data).verify([log]) and LogCheckpoint.parse(
            Note.parse(data).text).matches(world.second))
    return case


def _body_line(number: int, value: Callable[[World], str]) -> Callable[[World, bytes], bytes]:
    def change(world: World, data: bytes) -> bytes:
        lines = data.decode().split("\n")
        lines[number] = value(world)
        return "\n".join(lines).encode()
    return change


def _other_signer(world: World, data: bytes) -> bytes:
    return checkpoint_note(world.second, OTHER, origin=ORIGIN).to_bytes()


def _forged(world: World, data: bytes) -> bytes:
    note = Note.parse(data)
    forged = checkpoint_note(world.second, OTHER, origin=ORIGIN).signatures[0]
    return Note(note.text, (attrs.evolve(forged, key_id=note.signatures[0].key_id),)).to_bytes()


def _swapped(world: World, data: bytes) -> bytes:
    earlier = Note.parse(world.path("cp1.note").read_bytes())
    return Note(Note.parse(data).text, earlier.signatures).to_bytes()


def _unsigned(world: World, data: bytes) -> bytes:
    return Note.parse(data).text.encode()


def _tile_case(relative: str, index: int, change: Callable[[bytes], bytes] | None, *,
               on_path: bool = True) -> Callable[[World, Path], tuple[bool, bool]]:
    """A tampered (or missing) tile or bundle in a copy of the published directory: each
    verifier's full check of the directory refuses it, and, when the tampered data lies
    under entry ``index`` (``on_path``), so does its proof of that entry."""
    def case(world: World, tmp: Path) -> tuple[bool, bool]:
        copy = tmp / "tiles"
        shutil.copytree(world.tiles, copy)
        target = copy / relative
        if change is None:
            target.unlink()
        else:
            target.write_bytes(change(target.read_bytes()))
        go = accepted("tiles", "-base", copy, "-log-key", world.path("log.vkey"))
        if on_path:
            go = go or accepted("inclusion", "-base", copy, "-log-key",
                                world.path("log.vkey"), "-index", str(index))

        def proof() -> None:
            tree = TiledTree(TileDirectory(copy), SECOND)
            width = min(256, SECOND - index // 256 * 256)
            entry = TileDirectory(copy).entries(index // 256, width)[index % 256]
            if root_from_inclusion(leaf_hash(entry), index, SECOND,
                                   tree.inclusion_path(index)) != world.second.root_bytes:
                raise ProofError("the tiles do not give the signed root")

        python = not _refused(lambda: check_directory(copy, world.second.root_bytes, SECOND))
        if on_path:
            python = python or not _refused(proof)
        return go, python
    return case


def _flip(data: bytes, at: int = 40) -> bytes:
    changed = bytearray(data)
    changed[at] ^= 0x01
    return bytes(changed)


def _consistency_case(change: Callable[[World], ConsistencyProof],
                      old: str = "cp1.note", new: str = "cp2.note",
                      first: str = "first", second: str = "second"
                      ) -> Callable[[World, Path], tuple[bool, bool]]:
    def case(world: World, tmp: Path) -> tuple[bool, bool]:
        proof = change(world)
        path = _write(tmp, "consistency.json", proof.to_json())
        go = accepted("consistency", "-base", world.tiles, "-log-key", world.path("log.vkey"),
                      "-old", world.path(old), "-new", world.path(new), "-proof", path)
        earlier, later = getattr(world, first), getattr(world, second)
        return go, not _refused(lambda: verify_consistency(earlier, later, proof))
    return case


def rewritten_history(world: World, tmp: Path) -> tuple[bool, bool]:
    """The operator shows a second history of the same log: its checkpoint is signed
    by the same key, but it does not extend what the auditor held before."""
    other = world.home / "rewritten" / "tiles"
    go = accepted("consistency", "-base", other, "-log-key", world.path("log.vkey"),
                  "-old", world.path("cp1.note"))
    later = LogCheckpoint.parse(Note.parse((other / "checkpoint").read_bytes()).text)

    def python() -> None:
        path = TiledTree(TileDirectory(other), later.size).consistency_path(FIRST)
        check_consistency(FIRST, later.size, world.first.root_bytes, later.root, path)
    return go, not _refused(python)


def _witness_case(note: Callable[[World], bytes], witnesses: tuple[str, ...],
                  quorum: int | None = None) -> Callable[[World, Path], tuple[bool, bool]]:
    def case(world: World, tmp: Path) -> tuple[bool, bool]:
        data = note(world)
        path = _write(tmp, "cosigned.note", data)
        go = accepted("note", *policy(world, *witnesses, quorum=quorum), path)
        keys = [VerifierKey.parse(world.path(f"{w}.vkey").read_text()) for w in witnesses]
        wanted = len(keys) if quorum is None else quorum
        return go, not _refused(lambda: require_quorum(Note.parse(data), keys, wanted))
    return case


def _cosigned(world: World) -> Note:
    return Note.parse(world.path("cp2.cosigned").read_bytes())


def _one_witness(world: World) -> bytes:
    note = _cosigned(world)
    return Note(note.text, note.signatures[:2]).to_bytes()


def _altered_cosignature(world: World) -> bytes:
    note = _cosigned(world)
    changed = attrs.evolve(note.signatures[1], signature=_flip(note.signatures[1].signature, 7))
    return Note(note.text, (note.signatures[0], changed, note.signatures[2])).to_bytes()


def _impostor(world: World) -> bytes:
    """W3's cosignature presented under w1's name and key id."""
    note = _cosigned(world)
    fake = cosign(note.text, W3, "w1.example", 1_800_000_150)
    w1 = VerifierKey.parse(world.path("w1.vkey").read_text())
    return Note(note.text, (note.signatures[0], attrs.evolve(fake, key_id=w1.key_id))
                ).to_bytes()


TAMPERINGS: dict[str, Callable[[World, Path], tuple[bool, bool]]] = {
    "another event": another_event,
    "altered event": altered_event,
    "path reordered": _path_case(lambda p: (p[1], p[0], *p[2:])),
    "path altered": _path_case(lambda p: ("00" * 32, *p[1:])),
    "path shortened": _path_case(lambda p: p[:-1]),
    "path extended": _path_case(lambda p: (*p, p[0])),
    "wrong index": wrong_index,
    "index past the tree": index_past_the_tree,
    "wrong tree size": wrong_tree_size,
    "another log's checkpoint": another_logs_checkpoint,
    "altered root": _note_case(_body_line(2, lambda w: base64.b64encode(
        w.first.root_bytes).decode())),
    "wrong size": _note_case(_body_line(1, lambda w: str(SECOND - 1))),
    "altered origin": _note_case(_body_line(0, lambda w: "audit.example/other")),
    "unsigned": _note_case(_unsigned),
    "signed by another key": _note_case(_other_signer),
    "another key's signature under the log's key id": _note_case(_forged),
    "swapped signature": _note_case(_swapped),
    "wrong key": _note_case(lambda w, data: data, key="other.vkey"),
    "altered entry in a bundle": _tile_case("tile/entries/000", 0, lambda d: _flip(d, 40)),
    "truncated bundle": _tile_case("tile/entries/002.p/188", 699, lambda d: d[:-1]),
    "extra entry in a bundle": _tile_case("tile/entries/002.p/188", 600,
                                          lambda d: d + b"\x00\x01x", on_path=False),
    "altered leaf tile": _tile_case("tile/0/001", 300, lambda d: _flip(d, 8000)),
    "altered level-1 tile": _tile_case("tile/1/000.p/2", 10, lambda d: _flip(d, 3),
                                       on_path=False),
    "missing tile": _tile_case("tile/0/000", 10, None),
    "consistency path reversed": _consistency_case(
        lambda w: attrs.evolve(w.consistency, path=tuple(reversed(w.consistency.path)))),
    "consistency path shortened": _consistency_case(
        lambda w: attrs.evolve(w.consistency, path=w.consistency.path[:-1])),
    "consistency path extended": _consistency_case(
        lambda w: attrs.evolve(w.consistency, path=(*w.consistency.path,
                                                    w.consistency.path[0]))),
    "consistency path altered": _consistency_case(
        lambda w: attrs.evolve(w.consistency, path=("11" * 32, *w.consistency.path[1:]))),
    "consistency wrong first size": _consistency_case(
        lambda w: attrs.evolve(w.consistency, first_size=FIRST + 1)),
    "checkpoints swapped": _consistency_case(lambda w: w.consistency, old="cp2.note",
                                             new="cp1.note", first="second", second="first"),
    "rewritten history": rewritten_history,
    "one cosignature where two are required": _witness_case(_one_witness, ("w1", "w2")),
    "altered cosignature": _witness_case(_altered_cosignature, ("w1", "w2"), quorum=1),
    "cosigned by a witness outside the policy": _witness_case(
        lambda w: w.path("cp2.cosigned").read_bytes(), ("w3",), quorum=1),
    "another witness's signature under a trusted witness's id": _witness_case(
        _impostor, ("w1",), quorum=1),
}


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_the_independent_verifier_refuses_what_the_project_refuses(
        world: World, tmp_path: Path, name: str) -> None:
    go, python = TAMPERINGS[name](world, tmp_path)
    assert (go, python) == (False, False), f"{name}: accepted by go={go}, python={python}"


def test_every_changed_byte_of_the_cosigned_checkpoint_is_refused(world: World,
                                                                  tmp_path: Path) -> None:
    """Each byte of the log-signed, twice-cosigned note flipped: Go refuses every copy
    whose signed content changed. (Go reads base64 leniently: a flip that only touches
    a signature's unused padding bits leaves the same signature, so no tampering; the
    project's reader refuses those too, as not canonical.)"""
    data = world.path("cp2.cosigned").read_bytes()
    same, copies = [], []
    for position in range(len(data)):
        changed = _flip(data, position)
        path = tmp_path / f"{position}.note"
        path.write_bytes(changed)
        copies.append(path)
        if _same_signed_content(data, changed):
            same.append(str(path))
        with pytest.raises(ProofError):
            note = Note.parse(changed)
            require_quorum(note, [VerifierKey.parse(world.path(f"{w}.vkey").read_text())
                                  for w in ("w1", "w2")], 2)
            note.verify([VerifierKey.parse(world.path("log.vkey").read_text())])
    done = goverify("note", *policy(world, "w1", "w2"), *copies)
    lines = done.stdout.splitlines()
    assert len(lines) == len(copies)
    accepted_copies = [line.split()[1] for line in lines if line.startswith("OK ")]
    assert sorted(accepted_copies) == sorted(same)
    assert len(same) <= 3  # at most one padding character per signature line


def _signed_content(data: bytes) -> tuple[str, list[tuple[str, bytes]]]:
    """A note's text and signatures, the base64 read leniently, as Go reads it."""
    text = data.decode("utf-8")
    split = text.rfind("\n\n")
    lines = text[split + 2:].split("\n")
    if split < 0 or lines[-1] != "":
        raise ValueError("not a note")
    signatures = []
    for line in lines[:-1]:
        if not line.startswith("\u2014 "):
            raise ValueError("not a signature line")
        name, _, blob = line[2:].partition(" ")
        signatures.append((name, base64.b64decode(blob, validate=True)))
    return text[:split + 1], signatures


def _same_signed_content(original: bytes, changed: bytes) -> bool:
    try:
        return _signed_content(original) == _signed_content(changed)
    except ValueError:
        return False
