"""``bench/rate_windows.py`` keeps running: a tiny run over every store, checked for the
shape of what it writes (no timing is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_rate_window_bench_measures_every_store(tmp_path: Path) -> None:
    out = tmp_path / "rates"
    done = subprocess.run([sys.executable, str(BENCH / "rate_windows.py"), "--admits", "60",
                           "--clients", "2", "--out", str(out)], cwd=BENCH,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))
    assert {"load_before", "load_after", "command", "admits"} <= data["meta"].keys()
    strict = os.environ.get("CI", "").lower() == "true"  # CI has every server
    for store in ("process", "sqlite", "postgres", "redis"):
        row = data["results"][store]
        if "skipped" in row and not strict:
            continue
        assert {"p50_us", "p99_us", "concurrent_admits_per_s"} <= row.keys(), (store, row)
    assert "| sqlite |" in Path(f"{out}.md").read_text(encoding="utf-8")
