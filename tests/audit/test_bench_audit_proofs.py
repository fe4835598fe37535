"""``bench/audit_proofs.py`` keeps running: a small trail through both writers, checked
for the shape of what it writes. No timing is asserted: the figures are read from
``bench/results`` on a quiet machine, never judged in a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "audit_proofs.py"


@pytest.mark.parametrize("writer", ["sink", "lines"])
def test_the_bench_writes_every_figure(tmp_path: Path, writer: str) -> None:
    out = tmp_path / "audit_proofs"
    done = subprocess.run([sys.executable, str(BENCH), "--entries", "700", "--samples", "30",
                           "--writer", writer, "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(Path(f"{out}.json").read_text())
    meta = run["meta"]
    assert (meta["entries"], meta["writer"], meta["samples"]) == (700, writer, 30)
    assert {"load_start", "load_end", "command", "commit", "python"} <= meta.keys()
    assert run["proof_size"]["path_length_max"] == 10  # ceil(log2(700))
    assert run["proof_size"]["hashes_bytes_max"] == 320
    assert run["proof_size"]["compact_bytes_max"] < run["proof_size"]["json_bytes_max"]
    for figures in run["verify"].values():
        assert figures["samples"] == 30 and figures["p95_us"] >= figures["p50_us"] > 0
    assert len(run["proof_build"]["prove_inclusion_s"]) == 3
    assert {t["target"] for t in run["targets"]} >= {"verification p50 ≤ 1 ms"}
    text = Path(f"{out}.md").read_text()
    for heading in ("## The issue's targets", "## Proof size (bytes)", "## Verification (µs)",
                    "## Building (seconds, once each)"):
        assert heading in text
    assert "Command: `" in text and "load average" in text
