"""``bench/tiles.py`` keeps running: a small trail, checked for the shape of what it
writes. No timing is asserted: the figures are read from ``bench/results`` on a quiet
machine, never judged in a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "tiles.py"


def test_the_bench_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "tiles"
    done = subprocess.run([sys.executable, str(BENCH), "--entries", "700", "--step", "300",
                           "--increments", "2", "--samples", "20", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    run = json.loads(Path(f"{out}.json").read_text())
    meta = run["meta"]
    assert (meta["entries"], meta["step"], meta["increments"]) == (700, 300, 2)
    assert {"load_start", "load_end", "command", "commit", "python"} <= meta.keys()
    assert run["fresh"]["tiles"] == 4 and run["fresh"]["bundles"] == 3
    assert [s["entries_after"] for s in run["incremental"]] == [1000, 1300]
    assert run["nothing_new_written"] == 0 and run["deterministic"]["identical"]
    assert run["inclusion"]["from_tiles"]["samples"] == 20
    assert run["inclusion"]["example_path"] == "tile/0/005.p/20"  # at 1300
    assert len(run["targets"]) >= 3
    text = Path(f"{out}.md").read_text()
    for heading in ("## The issue's targets", "## Writing",
                    "## Inclusion proofs from the tiles (µs)"):
        assert heading in text
    assert "Command: `" in text and "load average" in text
