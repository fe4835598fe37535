"""Every ``audit`` command, given the duplicate-key variant (top level and nested) of each
genuine document it reads, refuses it: an event, proof or checkpoint with one line
``error (duplicate_key): <file>: duplicate key "<key>" …`` and exit 5 (REFUSED), a trail
line as ``BROKEN`` (exit 1) naming the line and the key. JSON that is no JSON at all
exits 2 (``error (invalid_json)``); NaN, a byte order mark, ``1E2`` or data after the
value exit 5 (``error (non_canonical_json)``). Issue 28: ``verify-proof`` said "OK" for
an event with ``"outcome":"deny",`` prepended."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from audit_support import dup, files_in, rewrite
from click.testing import CliRunner, Result
from governed_memory.audit import AuditSink
from governed_memory.audit.verify import checkpoint_of
from governed_memory.cli.main import cli
from governed_memory.events import ErasureEvidence, MemoryEvent

FIRST, MORE = 8, 4
PROVEN = "evt_5.3"  # entry 6, an erasure: its event nests erasure.counts


def run(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["audit", *map(str, args)])
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\n"
        f"stderr: {result.stderr}\nexception: {result.exception!r}")
    return result


def _event(n: int) -> MemoryEvent:
    return MemoryEvent(event_id=f"evt_{n}.3", type="memory.write.committed",
                       occurred_at=1_700_000_000.0 + n,
                       operation_id=f"op_{n}", operation="delete_user", principal_id="svc:dpo",
                       tenant_id="acme", outcome="committed",
                       count=1, erasure=ErasureEvidence(f"req_{n}", {"records": 1}, 1.0, 2.0,
                                                        "sha256:" + "cd" * 32))


async def _write(directory: Path, numbers: range) -> None:
    sink = AuditSink(directory)
    for n in numbers:
        await sink.emit(_event(n))
    await sink.close()


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trail, two Merkle checkpoints (one signed), a head-only one, an inclusion and a
    consistency proof, the proven event, and a key pair: every document a command reads."""
    home = tmp_path_factory.mktemp("home")
    runner = CliRunner()

    def make(*args: str, out: str | None = None) -> None:
        result = runner.invoke(cli, ["audit", *args])
        assert result.exit_code == 0, result.stderr
        if out is not None:
            (home / out).write_text(result.stdout)

    asyncio.run(_write(home / "trail", range(FIRST)))
    trail = str(home / "trail")
    make("checkpoint", trail, out="cp1.json")
    asyncio.run(_write(home / "trail", range(FIRST, FIRST + MORE)))
    make("keygen", str(home / "signing.pem"), str(home / "signing.pub"))
    make("checkpoint", trail, out="cp2.json")
    make("checkpoint", trail, "--sign", str(home / "signing.pem"), out="signed.json")
    make("prove", PROVEN, trail, "--checkpoint", str(home / "cp2.json"), "--event-out",
         str(home / "event.json"), out="proof.json")
    make("consistency", str(home / "cp1.json"), str(home / "cp2.json"), trail,
         out="consistency.json")
    (home / "head.jsonl").write_text(checkpoint_of([home / "trail"], 1.0).to_json() + "\n")
    return home


@pytest.fixture
def home(genuine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(genuine, tmp_path, dirs_exist_ok=True)
    (tmp_path / "signing.pem").chmod(0o600)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_genuine_document_is_accepted(home: Path) -> None:
    run("verify", "trail", "--checkpoint", "cp1.json", "--checkpoint", "cp2.json",
        "--checkpoint", "head.jsonl", "--checkpoint", "signed.json")
    run("verify", "--checkpoint", "signed.json", "--public-key", "signing.pub")
    run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event", "event.json")
    run("verify-proof", "consistency.json", "--checkpoint", "cp2.json", "--earlier",
        "cp1.json")
    run("prove", PROVEN, "trail", "--checkpoint", "cp2.json")
    run("consistency", "cp1.json", "cp2.json", "trail")
    run("query", "trail", "--operation", "delete_user")
    run("report", "trail", "--tenant", "acme", "--user", "alice")


def _first_key(text: bytes) -> bytes:
    return text[2:text.index(b'"', 2)]


TOP, NESTED = "top", "nested"


def _tamper(path: Path, variant: str) -> tuple[str, str]:
    """Give the document at ``path`` a duplicate key; the key and the object's path."""
    text = path.read_bytes().rstrip(b"\n")
    if path.name == "event.json":
        if variant == TOP:
            path.write_bytes(dup(text, b"{", b'"outcome":"deny",') + b"\n")  # issue 28
            return "outcome", "the top-level object"
        path.write_bytes(dup(text, b'"counts":{', b'"records":0,') + b"\n")
        return "records", "the object at $.erasure.counts"
    if variant == TOP:
        key = _first_key(text)
        path.write_bytes(dup(text, b"{", b'"' + key + b'":null,') + b"\n")
        return key.decode(), "the top-level object"
    path.write_bytes(dup(text, b"{", b'"note":{"k":1,"k":2},') + b"\n")
    return "k", "the object at $.note"


COMMANDS: list[tuple[str, list[str]]] = [
    ("event.json", ["verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event",
                    "event.json"]),
    ("proof.json", ["verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event",
                    "event.json"]),
    ("cp2.json", ["verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event",
                  "event.json"]),
    ("consistency.json", ["verify-proof", "consistency.json", "--checkpoint", "cp2.json",
                          "--earlier", "cp1.json"]),
    ("cp1.json", ["verify-proof", "consistency.json", "--checkpoint", "cp2.json",
                  "--earlier", "cp1.json"]),
    ("cp2.json", ["verify", "trail", "--checkpoint", "cp2.json"]),
    ("head.jsonl", ["verify", "trail", "--checkpoint", "head.jsonl"]),
    ("signed.json", ["verify", "--checkpoint", "signed.json", "--public-key",
                     "signing.pub"]),
    ("signed.json", ["verify", "trail", "--checkpoint", "signed.json", "--public-key",
                     "signing.pub"]),
    ("cp2.json", ["prove", PROVEN, "trail", "--checkpoint", "cp2.json"]),
    ("cp1.json", ["consistency", "cp1.json", "cp2.json", "trail"]),
    ("cp2.json", ["consistency", "cp1.json", "cp2.json", "trail"]),
]


@pytest.mark.parametrize("variant", [TOP, NESTED])
@pytest.mark.parametrize(("document", "args"), COMMANDS,
                         ids=[f"{a[0]}:{d}" for d, a in COMMANDS])
def test_a_document_with_a_duplicate_key_is_refused(home: Path, document: str,
                                                    args: list[str], variant: str) -> None:
    key, place = _tamper(home / document, variant)
    refused = run(*args, code=5)
    assert refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert line.startswith(f'error (duplicate_key): {document}'), line
    assert f'duplicate key "{key}" in {place}' in line


def _tamper_trail(home: Path, variant: str) -> str:
    """Give the proven event's trail line a duplicate key; the key."""
    first = files_in(home / "trail")[0]
    lines = first.read_bytes().splitlines()
    number = next(i for i, line in enumerate(lines) if PROVEN.encode() in line)
    if variant == TOP:
        lines[number] = dup(lines[number], b"{", b'"seq":1,')
        key = "seq"
    else:
        lines[number] = dup(lines[number], b'"counts":{', b'"records":0,')
        key = "records"
    rewrite(first, lines)
    return key


@pytest.mark.parametrize("variant", [TOP, NESTED])
@pytest.mark.parametrize("args", [
    ["verify", "trail"], ["checkpoint", "trail"], ["query", "trail"],
    ["report", "trail", "--tenant", "acme", "--user", "alice"],
    ["prove", PROVEN, "trail", "--checkpoint", "cp2.json"],
], ids=lambda args: args[0])
def test_a_trail_line_with_a_duplicate_key_is_broken(home: Path, args: list[str],
                                                     variant: str) -> None:
    key = _tamper_trail(home, variant)
    broken = run(*args, code=1)
    assert broken.stdout == ""
    (line,) = broken.stderr.splitlines()
    assert line.startswith("BROKEN ") and "audit-000001.jsonl:" in line
    assert f'duplicate key "{key}"' in line


def test_consistency_over_a_trail_with_a_duplicate_key_is_broken(home: Path) -> None:
    _tamper_trail(home, NESTED)  # read as leaves, never parsed: the root differs
    assert run("consistency", "cp1.json", "cp2.json", "trail", code=1).stderr.startswith(
        "BROKEN ")


def test_an_unverified_query_passes_the_line_over(home: Path) -> None:
    _tamper_trail(home, TOP)
    shown = run("query", "trail", "--no-verify", "--json").stdout
    assert PROVEN not in shown and shown.count("\n") == FIRST + MORE - 1


EditEvent = Callable[[bytes], bytes]


@pytest.mark.parametrize(("edit", "code", "exit_code"), [
    (lambda e: e.replace(b'"count":1', b'"count":NaN'), "non_canonical_json", 5),
    (lambda e: e.replace(b'"count":1', b'"count":1.0E0'), "non_canonical_json", 5),
    (lambda e: b"\xef\xbb\xbf" + e, "non_canonical_json", 5),
    (lambda e: e + b'{"outcome":"deny"}\n', "non_canonical_json", 5),
    (lambda e: e.decode().encode("utf-16"), "invalid_json", 2),
    (lambda e: e[:-10], "invalid_json", 2),
], ids=["nan", "exponent", "bom", "trailing", "utf16", "cut"])
def test_an_event_no_canonical_writer_produced_is_refused(home: Path, edit: EditEvent,
                                                          code: str, exit_code: int) -> None:
    event = home / "event.json"
    event.write_bytes(edit(event.read_bytes()))
    refused = run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event",
                  "event.json", code=exit_code)
    (line,) = refused.stderr.splitlines()
    assert line.startswith(f"error ({code}): event.json: "), line


def test_a_proof_that_is_no_json_is_a_bad_argument(home: Path) -> None:
    (home / "proof.json").write_text("not a proof")
    refused = run("verify-proof", "proof.json", "--checkpoint", "cp2.json", "--event",
                  "event.json", code=2)
    assert refused.stderr.startswith("error (invalid_json): proof.json: not JSON")


def test_a_key_file_holding_two_keys_is_a_bad_argument(home: Path) -> None:
    run("keygen", "other.pem", "other.pub")
    both = home / "both.pub"
    both.write_bytes((home / "other.pub").read_bytes() + (home / "signing.pub").read_bytes())
    assert "holds 2 PEM blocks" in run("verify", "--checkpoint", "signed.json",
                                       "--public-key", "both.pub", code=2).stderr
    private = home / "both.pem"
    private.write_bytes((home / "signing.pem").read_bytes()
                        + (home / "other.pem").read_bytes())
    private.chmod(0o600)
    assert "holds 2 PEM blocks" in run("checkpoint", "trail", "--sign", "both.pem",
                                       code=2).stderr
