"""``bench/policy_cost.py`` keeps running and writes every figure the docs describe.

Why: a bench nobody runs rots when a policy or the engine changes under it. No timing is
asserted (the figures are read on a quiet machine); only that each view ran for every
variant and operation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from policy_as_code_support import require

require("cedarpy", "cedar")
require("regopy", "rego")

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_a_tiny_run_writes_every_view(tmp_path: Path) -> None:
    out = tmp_path / "policy_cost"
    done = subprocess.run([sys.executable, str(BENCH / "policy_cost.py"), "--samples", "20",
                           "--manager-samples", "5", "--out", str(out)],
                          cwd=BENCH, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(Path(f"{out}.json").read_text())
    assert {"load_before", "load_after", "cedarpy", "regopy", "commit", "command"} <= set(
        data["meta"])
    for operation, row in data["decision"].items():
        assert set(row) == {"cedar", "rego", "write-review", "built-ins"}, operation
        for variant in row.values():
            assert variant["repeat"]["samples"] == variant["new"]["samples"] == 20
            assert variant["new"]["p95_us"] >= variant["new"]["p50_us"] > 0
    assert set(data["ratios"]) == set(data["decision"])
    for modes in data["engine"].values():
        assert set(modes) == {"repeat", "new"}
        assert all(set(row["added_p50_us"]) == {"cedar", "rego"} for row in modes.values())
    assert set(data["manager"]) == {"add", "add (new scope)", "get", "search"}
    assert data["thread_hop"]["p50_us"] > 0
    text = Path(f"{out}.md").read_text()
    for heading in ("## One decision", "## Ratios", "## Added to a decision",
                    "## Added to an operation", "Reproduce: "):
        assert heading in text
