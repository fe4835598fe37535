"""Helpers for the C2SP tests: the independent Go verifier (built once per session from
tests/audit/goverify against Debian's golang.org/x/mod), and small trails with keys.

The verifier needs ``go`` and x/mod's source (``golang-go`` and
``golang-golang-x-mod-dev``, which .ci/run installs). Without them a test skips with
the reason, except under CI=true, where it fails: CI must prove the formats with a
verifier written by someone else, never only with this project's code.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Final

import pytest
from audit_support import event
from governed_memory.audit import AuditSink

# c2sp.org/signed-note's example: a key and a signature made by its authors.
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = ("This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv"
             "1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n")

# A checkpoint of a public static-CT log (its Ed25519 note key) as published with the
# cosignatures of witnesses of the public witness network; one witness's key. Neither
# was made by this project: the log and the witness run other code.
REAL_LOG_VKEY = ("arche2025h1.staging.ct.transparency.dev+ba2f06c0+AU0vHmlGCS/PdN8b2OaGmKprLI8"
                 "HKM+dJ472xgFYh15f")
REAL_WITNESS_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
REAL_CHECKPOINT = """arche2025h1.staging.ct.transparency.dev
1432088532
U7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=

\u2014 arche2025h1.staging.ct.transparency.dev zTM8sQAAAZ5W0WdjBAMARjBEAiBjW5IQf9pvsYLfQFX6ho\
GREPMHbdQ3urbllzalApkptQIgIpwtEroeW2BXaHAI4kJXFbon5Ch9MNL5zRNZ55lvGt0=
\u2014 arche2025h1.staging.ct.transparency.dev ui8GwCF1+kWqZrxGdhj4aX3gcw7XUlXQQabg/27lefwhUk\
zbC3NygNI75MdhL1bfTW9g8Ei59RA23oHP7Ry1k3ZFWwQ=
\u2014 transparency.dev/DEV:witness-little-garden 2AQqhwAAAABqEiEgzgFIqqhbUoDwjMWE6UP8nd8/KYT\
zwZ2rhIgcqoXHAwVkjZr4AscylP3v7sEodkRAErumC2q44vdgJY096st5BQ==
\u2014 witness1.smartit.nu/witness1 pIyCDwAAAABqEiEghIp82KWebrw7/oHQwlTAm3g2RKS4+eebl8eO0WH+/i\
EcxZ75W3u5hNI7TOQtmJbqmNWVuE0tgh0XwzdZsDsUAQ==
\u2014 remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9DEZI+aVCIob\
WX9sXTynk5XeU/zZ0WBxtqB0DrAWfBw==
\u2014 witness.stagemole.eu Z/euoAAAAABqEiEgw0i+7g2ENfDAWHmtRzCfKTHSDwYDJA2NmKeGi9Y8FtEyOUvVr\
+AJmIY/2TUFucgKi7lI7cUiOvKFYe/TmN9DAg==
"""

GO_SOURCE: Final = Path(__file__).resolve().parent / "goverify"
GOPATH: Final = Path("/usr/share/gocode")
X_MOD: Final = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb"
_built: dict[str, Path] = {}


def go_verifier() -> Path:
    """The built ``goverify`` binary (built on first use, then reused)."""
    if "binary" in _built:
        return _built["binary"]
    go = shutil.which("go")
    missing = [what for what, ok in (("go (apt: golang-go)", go is not None),
                                     ("golang.org/x/mod (apt: golang-golang-x-mod-dev)",
                                      (X_MOD / "note").is_dir() and (X_MOD / "tlog").is_dir()))
               if not ok]
    if missing:
        reason = f"the independent verifier needs {' and '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    assert go is not None
    scratch = Path(tempfile.mkdtemp(prefix="goverify-"))
    binary = scratch / "goverify"
    env = {**os.environ, "GOPATH": str(GOPATH), "GO111MODULE": "off",
           "GOCACHE": str(scratch / "cache"), "GOFLAGS": ""}
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=GO_SOURCE, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    _built["binary"] = binary
    return binary


def goverify(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(go_verifier()), *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def accepted(*args: str | Path, cwd: Path | None = None) -> bool:
    """Whether the Go verifier accepts; a usage error (exit 2) is a broken test."""
    done = goverify(*args, cwd=cwd)
    assert done.returncode in (0, 1), (done.returncode, done.stderr)
    if done.returncode == 1:
        assert done.stderr.startswith("REFUSED "), done.stderr
    return done.returncode == 0


async def _append(directory: Path, start: int, stop: int) -> None:
    sink = AuditSink(directory, max_file_bytes=4096)
    for n in range(start, stop):
        await sink.emit(event(n))
    await sink.close()


def grow(directory: Path, start: int, stop: int) -> None:
    """Append events ``start`` to ``stop - 1`` to the trail, through the real sink."""
    asyncio.run(_append(directory, start, stop))
