"""``governed-memory audit keygen|checkpoint --sign|verify --public-key|prove|consistency|
verify-proof`` through click's runner: what each prints and its exit code (0 ok, 1
BROKEN, 2 bad arguments, 5 REFUSED, 6 not within the checkpoint); no key material in
any output, the trail or the checkpoint; cryptography loaded only when a key is used;
the progress bar on a large trail leaves the output as it was."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from audit_support import copy_trail, event, event_ids_in, files_in, rewrite, write_trail
from click.testing import CliRunner, Result
from governed_memory.audit import AuditSink
from governed_memory.audit.proofs import InclusionProof, TreeCheckpoint
from governed_memory.cli import audit_inputs
from governed_memory.cli.main import cli

ENTRIES = 24


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
    run("keygen", "signing.pem", "signing.pub")
    return tmp_path


def _key_material(home: Path) -> list[bytes]:
    pem = (home / "signing.pem").read_bytes()
    body = b"".join(pem.splitlines()[1:-1])
    return [pem, body, body[:24], body[-24:]]


def test_keygen_writes_a_private_key_only_its_owner_reads(home: Path) -> None:
    private, public = home / "signing.pem", home / "signing.pub"
    assert private.stat().st_mode & 0o777 == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    again = run("keygen", "signing.pem", "other.pub", code=2)
    assert "never overwritten" in again.stderr and not (home / "other.pub").exists()
    made = run("keygen", "second.pem", "second.pub")
    assert made.stdout.startswith("key id ed25519:")
    for secret in _key_material(home):
        assert secret not in made.stdout.encode() and secret not in made.stderr.encode()


def test_a_signed_checkpoint_verifies_and_an_altered_one_is_refused(home: Path) -> None:
    made = run("checkpoint", "trail", "--sign", "signing.pem")
    (home / "cp.json").write_text(made.stdout)
    checkpoint = TreeCheckpoint.from_json(made.stdout)
    assert checkpoint.signed and checkpoint.tree_size == ENTRIES
    ok = run("verify", "trail", "--checkpoint", "cp.json", "--public-key", "signing.pub")
    assert "1 checkpoint(s) matched, 1 signed by the key" in ok.stdout
    alone = run("verify", "--checkpoint", "cp.json", "--public-key", "signing.pub")
    assert alone.stdout.startswith("OK cp.json:1: ") and checkpoint.key_id in alone.stdout
    as_json = json.loads(run("verify", "trail", "--checkpoint", "cp.json", "--public-key",
                             "signing.pub", "--json").stdout)
    assert (as_json["status"], as_json["signatures_checked"]) == ("ok", 1)
    assert as_json["root"] == checkpoint.root

    # altered: a field changed after signing (the signature no longer covers it)
    body = json.loads(made.stdout)
    body["tree_size"] = ENTRIES - 1
    (home / "altered.json").write_text(json.dumps(body, sort_keys=True, separators=(",", ":")))
    refused = run("verify", "--checkpoint", "altered.json", "--public-key", "signing.pub",
                  code=5)
    assert refused.stderr.startswith("REFUSED altered.json:1: the signature does not verify")
    # against the trail, without a key: it no longer matches (BROKEN)
    assert run("verify", "trail", "--checkpoint", "altered.json", code=1).stderr.startswith(
        "BROKEN ")
    # re-encoded: every byte counts
    (home / "spaced.json").write_text(json.dumps(json.loads(made.stdout)))
    assert "canonical" in run("verify", "--checkpoint", "spaced.json", "--public-key",
                              "signing.pub", code=5).stderr
    # unsigned, and signed by another key
    (home / "unsigned.json").write_text(run("checkpoint", "trail").stdout)
    unsigned = run("verify", "trail", "--checkpoint", "unsigned.json", "--public-key",
                   "signing.pub", code=5)
    assert "not signed" in unsigned.stderr
    run("keygen", "other.pem", "other.pub")
    (home / "other.json").write_text(run("checkpoint", "trail", "--sign", "other.pem").stdout)
    other = run("verify", "--checkpoint", "other.json", "--public-key", "signing.pub", code=5)
    assert "signed by key ed25519:" in other.stderr
    # the sink's head-only checkpoints carry no signature
    head_only = home / "head.jsonl"
    head_only.write_text(json.dumps({"format": "governed-memory-audit/1",
                                     "chain_id": checkpoint.chain_id, "count": ENTRIES,
                                     "head": checkpoint.head, "created_at": 1.0}) + "\n")
    run("verify", "trail", "--checkpoint", str(head_only))
    assert "head-only" in run("verify", "--checkpoint", str(head_only), "--public-key",
                              "signing.pub", code=5).stderr


def test_keys_are_refused_when_unusable_and_never_shown(home: Path) -> None:
    os.chmod(home / "signing.pem", 0o640)
    loose = run("checkpoint", "trail", "--sign", "signing.pem", code=2)
    assert "group or others" in loose.stderr and "chmod 600" in loose.stderr
    os.chmod(home / "signing.pem", 0o600)
    wrong = run("checkpoint", "trail", "--sign", "signing.pub", code=2)  # a public key
    assert "not a PEM private key" in wrong.stderr or "group or others" in wrong.stderr
    os.chmod(home / "signing.pub", 0o600)
    assert "not a PEM private key" in run("checkpoint", "trail", "--sign", "signing.pub",
                                          code=2).stderr
    (home / "cp.json").write_text(run("checkpoint", "trail", "--sign", "signing.pem").stdout)
    assert "not a PEM public key" in run("verify", "--checkpoint", "cp.json",
                                         "--public-key", "signing.pem", code=2).stderr
    usage = run("verify", code=2)
    assert "give TRAIL" in usage.stderr
    made = run("checkpoint", "trail", "--sign", "signing.pem")
    outputs = [made.stdout.encode(), made.stderr.encode()]
    outputs += [path.read_bytes() for path in files_in(home / "trail")]
    for secret in _key_material(home):
        assert not any(secret in output for output in outputs)


def test_an_inclusion_proof_from_the_cli_checks_with_the_event_alone(home: Path) -> None:
    (home / "cp.json").write_text(run("checkpoint", "trail", "--sign", "signing.pem").stdout)
    wanted = event_ids_in(home / "trail")[9]
    proved = run("prove", wanted, "trail", "--checkpoint", "cp.json", "--public-key",
                 "signing.pub", "--event-out", "event.json")
    (home / "proof.json").write_text(proved.stdout)
    proof = InclusionProof.from_json(proved.stdout)
    assert (proof.event_id, proof.seq, proof.tree_size) == (wanted, 10, ENTRIES)
    assert json.loads((home / "event.json").read_text())["event_id"] == wanted
    assert f"is entry 10 of {ENTRIES}" in proved.stderr

    ok = run("verify-proof", "proof.json", "--checkpoint", "cp.json", "--event", "event.json",
             "--public-key", "signing.pub")
    assert ok.stdout.startswith(f"OK event {wanted} is entry 10 of chain ")
    # the trail is not needed
    (home / "trail").rename(home / "elsewhere")
    run("verify-proof", "proof.json", "--checkpoint", "cp.json", "--event", "event.json")

    # another event, an altered event, an altered proof, a missing event argument
    body = json.loads((home / "event.json").read_text())
    (home / "wrong.json").write_text(json.dumps({**body, "outcome": "deny"}))
    assert "do not hash to the checkpoint's root" in run(
        "verify-proof", "proof.json", "--checkpoint", "cp.json", "--event", "wrong.json",
        code=5).stderr
    shortened = json.loads(proved.stdout)
    shortened["audit_path"] = shortened["audit_path"][:-1]
    (home / "short.json").write_text(json.dumps(shortened, sort_keys=True,
                                                separators=(",", ":")))
    assert "shortened" in run("verify-proof", "short.json", "--checkpoint", "cp.json",
                              "--event", "event.json", code=5).stderr
    run("verify-proof", "proof.json", "--checkpoint", "cp.json", code=2)
    (home / "junk.json").write_text("not a proof")
    run("verify-proof", "junk.json", "--checkpoint", "cp.json", "--event", "event.json",
        code=2)
    run("verify-proof", "cp.json", "--checkpoint", "cp.json", code=2)


def test_prove_says_when_the_event_is_not_within_the_checkpoint(home: Path) -> None:
    (home / "cp.json").write_text(run("checkpoint", "trail").stdout)
    asyncio.run(_append(home / "trail", ENTRIES, ENTRIES + 3))
    late = event_ids_in(home / "trail")[ENTRIES + 1]
    after = run("prove", late, "trail", "--checkpoint", "cp.json", code=6)
    assert f"is entry {ENTRIES + 2}, after the checkpoint's {ENTRIES} entries" in after.stderr
    assert after.stdout == ""
    assert "not in the trail" in run("prove", "evt_nowhere", "trail", "--checkpoint",
                                     "cp.json", code=6).stderr
    # a trail edited since: BROKEN, and no proof printed
    files = files_in(home / "trail")
    lines = files[0].read_bytes().splitlines()
    lines[1] = lines[1].replace(b'"count":1', b'"count":2')
    rewrite(files[0], lines)
    edited = run("prove", event_ids_in(home / "trail")[0], "trail", "--checkpoint", "cp.json",
                 code=1)
    assert edited.stderr.startswith("BROKEN ") and edited.stdout == ""
    # a head-only checkpoint has no root to prove against
    (home / "head.jsonl").write_text(json.dumps({
        "format": "governed-memory-audit/1", "chain_id": "chain_x", "count": 1,
        "head": "ab" * 32, "created_at": 1.0}) + "\n")
    assert "no Merkle root" in run("prove", late, "trail", "--checkpoint", "head.jsonl",
                                   code=2).stderr


async def _append(directory: Path, start: int, stop: int) -> None:
    sink = AuditSink(directory, max_file_bytes=4096)
    for n in range(start, stop):
        await sink.emit(event(n))
    await sink.close()


def test_consistency_from_the_cli(home: Path) -> None:
    (home / "cp1.json").write_text(run("checkpoint", "trail", "--sign", "signing.pem").stdout)
    files_before = len(files_in(home / "trail"))
    asyncio.run(_append(home / "trail", ENTRIES, ENTRIES + 20))
    assert len(files_in(home / "trail")) > files_before
    (home / "cp2.json").write_text(run("checkpoint", "trail", "--sign", "signing.pem").stdout)
    made = run("consistency", "cp1.json", "cp2.json", "trail", "--public-key", "signing.pub")
    (home / "consistency.json").write_text(made.stdout)
    ok = run("verify-proof", "consistency.json", "--checkpoint", "cp2.json", "--earlier",
             "cp1.json", "--public-key", "signing.pub")
    assert f"at {ENTRIES + 20} entries extends itself at {ENTRIES} entries" in ok.stdout
    assert "REFUSED" in run("verify-proof", "consistency.json", "--checkpoint", "cp1.json",
                            "--earlier", "cp2.json", code=5).stderr
    run("verify-proof", "consistency.json", "--checkpoint", "cp2.json", code=2)
    assert "older checkpoint first" in run("consistency", "cp2.json", "cp1.json", "trail",
                                           code=2).stderr
    # another trail
    other = home / "other"
    asyncio.run(write_trail(other, 5))
    assert "REFUSED" in run("consistency", "cp1.json", "cp2.json", str(other), code=5).stderr


def test_a_large_trail_gets_a_progress_bar_and_the_same_output(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quiet = run("checkpoint", "trail").stdout
    monkeypatch.setattr(audit_inputs, "PROGRESS_FROM_BYTES", 1)
    monkeypatch.setattr(audit_inputs, "_interactive", lambda: True)
    shown = run("checkpoint", "trail")
    assert "checkpointing" in shown.stderr
    assert json.loads(shown.stdout)["root"] == json.loads(quiet)["root"]
    (home / "cp.json").write_text(shown.stdout)
    proved = run("prove", event_ids_in(home / "trail")[3], "trail", "--checkpoint", "cp.json")
    assert "proving" in proved.stderr and InclusionProof.from_json(proved.stdout).seq == 4
    assert "verifying" in run("verify", "trail", "--checkpoint", "cp.json").stderr


def test_cryptography_is_loaded_only_when_a_key_is_used(home: Path) -> None:
    (home / "cp.json").write_text(run("checkpoint", "trail").stdout)
    code = ("import sys\n"
            "from governed_memory.cli.main import cli\n"
            "try:\n"
            "    cli(sys.argv[1:])\n"
            "except SystemExit as done:\n"
            "    assert done.code in (0, None), done.code\n"
            "print('LOADED', 'cryptography' in sys.modules)\n")

    def loaded(*args: str) -> bool:
        done = subprocess.run([sys.executable, "-c", code, "audit", *args], cwd=home,
                              capture_output=True, text=True, check=True)
        return done.stdout.splitlines()[-1] == "LOADED True"

    assert not loaded("verify", "trail", "--checkpoint", "cp.json")
    assert not loaded("checkpoint", "trail")
    assert not loaded("--help")
