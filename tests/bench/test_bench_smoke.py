"""The benchmarks keep running: ``bench/peers.py --quick`` and a tiny ``bench/scale.py``
on systems that need no peer package, checked for the shape of what they write.

Why: a bench nobody runs rots silently when the port or the manager changes under it.
No timing is asserted (the figures are the lead's to read on a quiet machine); only that
every system ran and every column the docs describe is there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
OPERATIONS = ("add", "get", "search", "update", "delete")
SYSTEMS = ("fts5", "gm-memory-lexical", "native-sqlite")


def run(script: str, *args: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=BENCH,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


def test_peers_quick_writes_every_column(tmp_path: Path) -> None:
    out = tmp_path / "peers"
    run("peers.py", "--quick", "--systems", *SYSTEMS, "--out", str(out))

    data = json.loads(Path(f"{out}.json").read_text())
    assert data["meta"]["records"] == 50
    assert data["meta"]["rounds"] == 1
    assert {"load_min", "load_max", "python", "sqlite", "command"} <= data["meta"].keys()
    assert [run["system"] for run in data["runs"]] == list(SYSTEMS)
    assert all("load_before" in run and "load_after" in run for run in data["runs"])
    for name in SYSTEMS:
        row = data["results"][name]
        assert "ops" in row, row  # ran: neither skipped nor failed
        assert set(row["ops"]) == set(OPERATIONS)
        for op in OPERATIONS:
            figures = row["ops"][op]
            assert figures["samples"] == 20
            assert figures["median_us"] > 0
            assert figures["p95_us"] >= figures["median_us"]
        assert set(row["vs_fts5"]) == set(OPERATIONS)
        assert row["vs_sqlitestore"] is None  # LangGraph was not in this run
        assert {"lag_max_ms", "lag_p99_ms", "bytes_per_search", "mean_hits"} <= row.keys()
    assert data["results"]["fts5"]["vs_fts5"] == dict.fromkeys(OPERATIONS, 1.0)
    # The SQLite backend's counters, read around the search burst.
    assert data["results"]["native-sqlite"]["stats_delta_per_search"] is not None
    assert {row["target"] for row in data["targets"]} >= {"governed lexical search ÷ raw FTS5"}

    text = Path(f"{out}.md").read_text()
    for heading in ("## Median (p95) µs per call", "## ÷ raw FTS5 (medians)",
                    "## The issue's targets", "## Search burst"):
        assert heading in text
    for name in SYSTEMS:
        assert f"| {name} |" in text


def test_scale_tiny_writes_every_section(tmp_path: Path) -> None:
    out = tmp_path / "scale"
    run("scale.py", "--sections", "lexical", "crowd", "hybrid", "readers",
        "--backends", "sqlite", "--sizes", "100", "300", "--searches", "3",
        "--scope-size", "50", "--crowd", "200", "--hybrid-sizes", "100",
        "--hybrid-searches", "3", "--recall-queries", "3", "--reader-records", "100",
        "--reader-ops", "16",
        "--out", str(out))

    data = json.loads(Path(f"{out}.json").read_text())
    sections = data["sections"]
    assert set(sections) == {"lexical", "crowd", "hybrid", "readers"}
    assert [row["size"] for row in sections["lexical"]["rows"]] == [100, 300]
    assert sections["lexical"]["ratios"]["sqlite"]["p50"] > 0
    assert sections["crowd"]["rows"][0]["other_users"] == 4
    assert sections["crowd"]["rows"][0]["ratio_p50"] > 0
    hybrid = sections["hybrid"]["rows"][0]
    assert hybrid["mean_hits"] > 0
    assert hybrid["lag_max_ms"] >= 0
    assert 0 <= hybrid["vector_recall_at_10"] <= 1
    readers = sections["readers"]["rows"][0]
    for call in ("get", "search"):
        assert readers[call]["ratio"] > 0
    text = Path(f"{out}.md").read_text()
    for heading in ("## Lexical search", "## A small scope", "## Hybrid search",
                    "## 8 concurrent readers"):
        assert heading in text
