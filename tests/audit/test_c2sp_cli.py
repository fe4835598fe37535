"""``governed-memory audit checkpoint --note``, ``tiles``, ``verifier-key``,
``verify-note``, ``verify-tiles``, ``cosign`` and the witness policy of ``verify-proof``
and ``consistency``, through click's runner: what each writes and prints, and its exit
code (0 ok, 1 BROKEN, 2 bad arguments, 5 REFUSED). A witness refuses a rollback, a fork
and a rewritten history and keeps its state unchanged when it does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from audit_support import copy_trail, event, event_ids_in, write_trail
from c2sp_support import grow
from click.testing import CliRunner, Result
from governed_memory.audit import AuditSink
from governed_memory.audit.checkpoint_notes import read_checkpoint_note
from governed_memory.audit.notes import COSIGNATURE_V1, ED25519, Note, VerifierKey
from governed_memory.audit.proofs import TreeCheckpoint
from governed_memory.cli.main import cli

ENTRIES = 40
ORIGIN = "audit.example/cli"


def run(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["audit", *map(str, args)])
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\n"
        f"stderr: {result.stderr}\nexception: {result.exception!r}")
    return result


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trail")
    asyncio.run(write_trail(directory, ENTRIES))
    return directory


@pytest.fixture
def home(tmp_path: Path, pristine: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    copy_trail(pristine, tmp_path / "trail")
    for name in ("log", "w1", "w2", "other"):
        run("keygen", f"{name}.pem", f"{name}.pub")
    (tmp_path / "log.vkey").write_text(run("verifier-key", "log.pub", "--name", ORIGIN).stdout)
    for name in ("w1", "w2"):
        (tmp_path / f"{name}.vkey").write_text(
            run("verifier-key", f"{name}.pub", "--name", f"{name}.example", "--witness").stdout)
    return tmp_path


def checkpoint(home: Path, name: str) -> TreeCheckpoint:
    made = run("checkpoint", "trail", "--sign", "log.pem", "--note", f"{name}.note",
               "--origin", ORIGIN)
    (home / f"{name}.json").write_text(made.stdout)
    return TreeCheckpoint.from_json(made.stdout)


def cosign(witness: str, note: str = "tiles/checkpoint", code: int = 0) -> Result:
    return run("cosign", note, "--tiles", "tiles", "--log-key", "log.vkey", "--key",
               f"{witness}.pem", "--name", f"{witness}.example", "--state",
               f"{witness}.state", code=code)


def test_keys_print_as_verifier_keys(home: Path) -> None:
    log = VerifierKey.parse((home / "log.vkey").read_text())
    witness = VerifierKey.parse((home / "w1.vkey").read_text())
    assert (log.name, log.signature_type) == (ORIGIN, ED25519)
    assert (witness.name, witness.signature_type) == ("w1.example", COSIGNATURE_V1)
    assert "without spaces" in run("verifier-key", "log.pub", "--name", "a b", code=2).stderr
    assert "not a PEM public key" in run("verifier-key", "log.pem", "--name", "x",
                                         code=2).stderr


def test_a_signed_checkpoint_is_also_written_as_a_c2sp_note(home: Path) -> None:
    cp = checkpoint(home, "cp")
    note, body = read_checkpoint_note((home / "cp.note").read_bytes())
    assert (body.origin, body.size, body.root) == (ORIGIN, ENTRIES, cp.root_bytes)
    assert note.verify([VerifierKey.parse((home / "log.vkey").read_text())])
    ok = run("verify-note", "cp.note", "--log-key", "log.vkey", "--checkpoint", "cp.json")
    assert ok.stdout.startswith(f"OK {ORIGIN} at {ENTRIES} entries")
    default = run("checkpoint", "trail", "--sign", "log.pem", "--note", "default.note")
    assert (home / "default.note").read_text().startswith(
        "governed-memory/" + json.loads(default.stdout)["chain_id"] + "\n")
    assert "give --sign" in run("checkpoint", "trail", "--note", "x.note", code=2).stderr
    assert "give --note" in run("checkpoint", "trail", "--origin", ORIGIN, code=2).stderr
    run("checkpoint", "trail", "--sign", "log.pem", "--note", "x.note", "--origin", "a+b",
        code=2)
    # the note refused for another key, a changed byte, another tree
    assert "REFUSED" in run("verify-note", "cp.note", "--log-key",
                            run("verifier-key", "other.pub", "--name", ORIGIN).stdout.strip(),
                            code=5).stderr
    (home / "altered.note").write_bytes((home / "cp.note").read_bytes().replace(
        f"\n{ENTRIES}\n".encode(), f"\n{ENTRIES + 1}\n".encode()))
    assert "does not verify" in run("verify-note", "altered.note", "--log-key", "log.vkey",
                                    code=5).stderr
    grow(home / "trail", ENTRIES, ENTRIES + 5)
    checkpoint(home, "later")
    assert "REFUSED" in run("verify-note", "later.note", "--log-key", "log.vkey",
                            "--checkpoint", "cp.json", code=5).stderr
    (home / "junk.note").write_text("not a note\n")
    run("verify-note", "junk.note", "--log-key", "log.vkey", code=2)


def test_tiles_are_published_extended_and_checked(home: Path) -> None:
    checkpoint(home, "cp1")
    made = run("tiles", "trail", "--checkpoint", "cp1.json", "--sign", "log.pem",
               "--origin", ORIGIN, "--out", "tiles")
    assert made.stdout.startswith(f"tiles tiles: log {ORIGIN} at {ENTRIES} entries: ")
    assert (home / "tiles/checkpoint").read_bytes() == (home / "cp1.note").read_bytes()
    assert run("verify-tiles", "tiles", "--log-key", "log.vkey").stdout.startswith(
        f"OK {ORIGIN} at {ENTRIES} entries: 1 tile(s) and 1 entry bundle(s)")
    grow(home / "trail", ENTRIES, 300)
    checkpoint(home, "cp2")
    grown = run("tiles", "trail", "--note", "cp2.note", "--checkpoint", "cp2.json",
                "--out", "tiles")
    assert "at 300 entries (was 40)" in grown.stdout and "2 partial one(s) replaced" in grown.stdout
    run("verify-tiles", "tiles", "--log-key", "log.vkey")
    # a checkpoint taken here, verifying the trail (no --checkpoint)
    assert "at 300 entries" in run("tiles", "trail", "--sign", "log.pem", "--origin",
                                   ORIGIN, "--out", "again").stdout
    # arguments: neither or both of --sign/--note; an older checkpoint; another trail
    run("tiles", "trail", "--out", "x", code=2)
    run("tiles", "trail", "--out", "x", "--sign", "log.pem", "--note", "cp2.note", code=2)
    assert "more than the checkpoint's 40" in run("tiles", "trail", "--note", "cp1.note",
                                                  "--out", "tiles", code=2).stderr
    other = home / "other-trail"
    asyncio.run(write_trail(other, 3))
    assert "REFUSED" in run("tiles", str(other), "--checkpoint", "cp2.json", "--sign",
                            "log.pem", "--out", "y", code=5).stderr
    assert "REFUSED" in run("tiles", "trail", "--note", "cp1.note", "--checkpoint",
                            "cp2.json", "--out", "y", code=5).stderr
    # a damaged copy is refused by verify-tiles
    (home / "tiles/tile/entries/000").write_bytes(b"\x00")
    assert "REFUSED" in run("verify-tiles", "tiles", "--log-key", "log.vkey", code=5).stderr


def test_a_trail_that_no_longer_matches_is_broken(home: Path) -> None:
    checkpoint(home, "cp")
    run("tiles", "trail", "--checkpoint", "cp.json", "--sign", "log.pem", "--origin", ORIGIN,
        "--out", "tiles")
    copy = home / "copy"
    copy_trail(home / "trail", copy)
    first = sorted(copy.glob("audit-*.jsonl"))[0]
    first.write_bytes(first.read_bytes().replace(b'"count":1', b'"count":2', 1))
    broken = run("tiles", "copy", "--checkpoint", "cp.json", "--sign", "log.pem", "--origin",
                 ORIGIN, "--out", "fresh", code=1)
    assert broken.stderr.startswith("BROKEN ") and "checkpoint's root" in broken.stderr


def _rewritten(home: Path, size: int) -> Path:
    """The same log (origin and key) showing another history of ``size`` entries."""
    async def write() -> None:
        sink = AuditSink(home / "forged-trail", max_file_bytes=4096)
        for n in range(size):
            await sink.emit(event(n, operation="delete") if n == 3 else event(n))
        await sink.close()

    asyncio.run(write())
    made = run("checkpoint", "forged-trail", "--sign", "log.pem", "--note", "forged.note",
               "--origin", ORIGIN)
    (home / "forged.json").write_text(made.stdout)
    run("tiles", "forged-trail", "--note", "forged.note", "--out", "forged-tiles")
    return home / "forged.note"


def test_a_witness_cosigns_only_a_log_that_grew(home: Path) -> None:
    checkpoint(home, "cp1")
    run("tiles", "trail", "--checkpoint", "cp1.json", "--sign", "log.pem", "--origin", ORIGIN,
        "--out", "tiles")
    first = cosign("w1")
    assert "the first checkpoint of this log it sees" in first.stderr
    (home / "cp1.cosigned").write_text(first.stdout)
    grow(home / "trail", ENTRIES, 90)
    checkpoint(home, "cp2")
    run("tiles", "trail", "--note", "cp2.note", "--out", "tiles")
    second = cosign("w1")
    assert f"extends {ENTRIES} entries" in second.stderr
    note = Note.parse(second.stdout)
    assert [s.name for s in note.signatures] == [ORIGIN, "w1.example"]
    state = (home / "w1.state").read_bytes()
    # a rollback: the older checkpoint after the newer
    assert "fewer than the 90" in cosign("w1", "cp1.note", code=5).stderr
    # a fork: another root at the same size; a rewritten history at a larger size
    assert "another root" in cosign("w1", str(_rewritten(home, 90)), code=5).stderr
    (home / "forged-trail").rename(home / "forged-90")
    (home / "forged-tiles").rename(home / "forged-tiles-90")
    forged = _rewritten(home, 120)
    refused = run("cosign", str(forged), "--tiles", "forged-tiles", "--log-key", "log.vkey",
                  "--key", "w1.pem", "--name", "w1.example", "--state", "w1.state", code=5)
    assert "REFUSED" in refused.stderr
    # the log key changed; a checkpoint the log did not sign
    run("verifier-key", "other.pub", "--name", ORIGIN)
    assert "REFUSED" in run("cosign", "cp2.note", "--tiles", "tiles", "--log-key",
                            run("verifier-key", "other.pub", "--name", ORIGIN).stdout.strip(),
                            "--key", "w1.pem", "--name", "w1.example", "--state", "w1.state",
                            code=5).stderr
    assert (home / "w1.state").read_bytes() == state  # nothing refused was recorded
    # the state of another witness, or damaged
    assert "not the state of witness" in run(
        "cosign", "--tiles", "tiles", "--log-key", "log.vkey", "--key", "w2.pem", "--name",
        "w2.example", "--state", "w1.state", code=2).stderr
    (home / "bad.state").write_text("{")
    run("cosign", "--tiles", "tiles", "--log-key", "log.vkey", "--key", "w2.pem", "--name",
        "w2.example", "--state", "bad.state", code=2)


def test_proofs_can_require_k_of_n_witnesses(home: Path) -> None:
    checkpoint(home, "cp1")
    run("tiles", "trail", "--checkpoint", "cp1.json", "--sign", "log.pem", "--origin", ORIGIN,
        "--out", "tiles")
    cosign("w1")
    grow(home / "trail", ENTRIES, 70)
    checkpoint(home, "cp2")
    run("tiles", "trail", "--note", "cp2.note", "--out", "tiles")
    (home / "one.note").write_text(cosign("w1").stdout)
    (home / "two.note").write_text(cosign("w2", "one.note").stdout)
    wanted = event_ids_in(home / "trail")[5]
    (home / "proof.json").write_text(run("prove", wanted, "trail", "--checkpoint", "cp2.json",
                                         "--event-out", "event.json").stdout)
    both = ("--witness", "w1.vkey", "--witness", "w2.vkey")
    ok = run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event", "event.json",
             "--cosigned", "two.note", *both)
    assert ok.stdout.rstrip().endswith("cosigned by 2 of 2 witness(es) (w1.example, w2.example)")
    run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event", "event.json",
        "--cosigned", "one.note", *both, "--quorum", "1")
    short = run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event",
                "event.json", "--cosigned", "one.note", *both, code=5)
    assert "the policy requires 2" in short.stderr
    assert "REFUSED" in run("verify-proof", "proof.json", "--checkpoint", "cp2.json",
                            "--event", "event.json", "--cosigned", "cp1.note", "--witness",
                            "w1.vkey", code=5).stderr  # another tree's note
    run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event", "event.json",
        *both, code=2)
    run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event", "event.json",
        "--cosigned", "two.note", *both, "--quorum", "3", code=2)
    made = run("consistency", "cp1.json", "cp2.json", "trail", "--cosigned", "two.note", *both)
    (home / "consistency.json").write_text(made.stdout)
    assert "cosigned by 2 of 2" in run("verify-proof", "consistency.json", "--checkpoint",
                                       "cp2.json", "--earlier", "cp1.json", "--cosigned",
                                       "two.note", *both).stdout
    assert "REFUSED" in run("consistency", "cp1.json", "cp2.json", "trail", "--cosigned",
                            "one.note", *both, code=5).stderr
    assert "OK cosigned" not in run("verify-note", "two.note", "--log-key", "log.vkey",
                                    *both).stdout
