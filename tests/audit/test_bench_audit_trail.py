"""``bench/audit_trail.py`` keeps running: a few adds per variant, a few hundred events
recorded and sequenced, checked for the shape of what it writes. No timing is asserted:
the figures are read from ``bench/results`` on a quiet machine, never judged in a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from postgres_support import require_postgres

BENCH = Path(__file__).resolve().parents[2] / "bench" / "audit_trail.py"


def test_the_bench_writes_every_figure(tmp_path: Path) -> None:
    require_postgres()
    out = tmp_path / "audit_trail"
    done = subprocess.run([sys.executable, str(BENCH), "--adds", "12", "--warmup", "2",
                           "--events", "200", "--emitters", "4", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(Path(f"{out}.json").read_text())
    assert {"command", "python", "load_at_start", "load_at_end"} <= run["meta"].keys()
    variants = run["operations"]["add"]
    assert set(variants) == {"none", "memory-sink", "postgres-trail", "file-trail"}
    assert all(row["median_us"] > 0 and "median_ratio" in row for row in variants.values())
    assert [row["entries"] for row in run["sequencing"]] == [200, 200, 200]
    assert all(row["events_per_statement"] >= 1 for row in run["recording"])
    text = Path(f"{out}.md").read_text()
    assert run["operations"]["get"]["postgres-trail"]["median_us"] > 0
    assert "## An add" in text and "## Sequencing" in text and "load" in text
