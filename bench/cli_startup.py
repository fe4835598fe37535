"""How long the command line takes to start: ``governed-memory --help`` and one ``add``,
``search`` and ``list`` on the embedded default (SQLite), each a fresh process, as a
user at a shell runs them.

Every sample is a new process started through the installed ``governed-memory`` script
next to this Python (so the interpreter's own start-up and ``site`` count, as they do
for a user). Bytecode caches are warm (``PYTHONDONTWRITEBYTECODE`` is removed from the
environment and one untimed run of each command precedes the samples): a pip install
compiles them, and measuring compilation would measure the checkout, not the tool.
Commands are interleaved sample by sample so load on a shared machine falls on all of
them alike; the load average is recorded before and after.

Each command is also run once under ``python -X importtime`` to count what it imports,
and whether numpy, pytest, hypothesis or the OpenTelemetry SDK are among the modules.

Results go to ``bench/results/cli_startup.json`` under ``--label`` (an earlier label's
figures are kept, so a "before" and an "after" run sit side by side) and
``cli_startup.md`` renders every label.

    python bench/cli_startup.py [--samples 15] [--label after]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
TARGETS = {"help": 0.15, "add": 0.3, "search": 0.3}
"""Issue 17's budgets, seconds (median of the samples)."""
WATCHED = ("numpy", "pytest", "hypothesis", "opentelemetry.sdk", "pluggy", "sqlite3")


def commands(db: Path) -> dict[str, list[str]]:
    scope = ["--db", str(db), "--tenant", "acme", "--user", "alice"]
    return {
        "help": ["--help"],
        "version": ["--version"],
        "add": ["add", *scope, "Alice prefers dark mode in every editor"],
        "search": ["search", *scope, "dark mode"],
        "list": ["list", *scope],
    }


def script() -> Path:
    path = Path(sys.executable).parent / "governed-memory"
    if not path.exists():
        sys.exit(f"no governed-memory script next to {sys.executable}; pip install first")
    return path


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "GOVERNED_MEMORY_BLOCK_PLUGINS")}
    env["GOVERNED_MEMORY_HOME"] = str(home)
    return env


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed


def imports(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Modules the command imports (``-X importtime``), the slowest top-level ones, and
    which of the watched heavy packages are among them."""
    argv = [sys.executable, "-X", "importtime", "-c",
            "import sys; from governed_memory.cli.main import main; "
            "sys.argv[0] = 'governed-memory'; sys.exit(main())", *args]
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    modules: list[tuple[str, int, int]] = []  # name, cumulative µs, depth
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip(" ")) - 1) // 2
        modules.append((name.strip(), int(cumulative), depth))
    names = {name for name, _, _ in modules}
    top = sorted(((n, us) for n, us, depth in modules if depth == 0), key=lambda r: -r[1])
    return {
        "modules": len(modules),
        "import_ms": round(sum(us for _, us, depth in modules if depth == 0) / 1000, 1),
        "slowest": [{"module": n, "ms": round(us / 1000, 1)} for n, us in top[:8]],
        "loaded": {w: any(n == w or n.startswith(w + ".") for n in names) for w in WATCHED},
    }


def git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parent)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True,
                               cwd=Path(__file__).parent).stdout.strip()
        return done.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def measure(samples: int) -> dict[str, Any]:
    exe = script()
    with tempfile.TemporaryDirectory(prefix="gm-cli-bench-") as scratch:
        root = Path(scratch)
        home, cwd = root / "home", root / "cwd"
        home.mkdir()
        cwd.mkdir()
        env = environment(home)
        table = commands(root / "memory.db")
        for args in table.values():  # warm the bytecode caches, create the database
            timed([str(exe), *args], env, cwd)
        load_before = os.getloadavg()
        times: dict[str, list[float]] = {name: [] for name in table}
        for _ in range(samples):
            for name, args in table.items():
                times[name].append(timed([str(exe), *args], env, cwd))
        load_after = os.getloadavg()
        imported = {name: imports(args, env, cwd) for name, args in table.items()}
        stray = sorted(p.name for p in cwd.iterdir())
    rows = {}
    for name, values in times.items():
        ordered = sorted(values)
        rows[name] = {
            "median_s": round(statistics.median(values), 4),
            "min_s": round(ordered[0], 4),
            "p90_s": round(ordered[max(0, int(len(ordered) * 0.9) - 1)], 4),
            "target_s": TARGETS.get(name),
            **imported[name],
        }
    return {
        "meta": {
            "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": git_commit(), "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count(), "samples": samples,
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in load_after],
            "written_to_cwd": stray,
        },
        "commands": rows,
    }


def render(all_runs: dict[str, Any]) -> str:
    lines = ["# CLI start-up", "",
             "Each figure is a fresh `governed-memory` process on the embedded default "
             "(SQLite), warm bytecode caches, commands interleaved; seconds. Targets "
             "(issue 17): `--help` ≤ 0.15 s, one `add` or `search` ≤ 0.3 s (median). "
             "*modules* and *imports ms* come from one extra run under "
             "`python -X importtime` (which slows imports a little).", ""]
    for label, run in all_runs.items():
        meta = run["meta"]
        lines += [f"## {label}", "",
                  f"Commit {meta['commit']}, Python {meta['python']} on {meta['machine']} "
                  f"({meta['cpus']} CPUs), {meta['when']}, {meta['samples']} samples per "
                  f"command; load average {', '.join(map(str, meta['load_before']))} before, "
                  f"{', '.join(map(str, meta['load_after']))} after. Files left in the "
                  f"working directory: {', '.join(meta['written_to_cwd']) or 'none'}.", "",
                  "| command | median s | min s | p90 s | target s | modules | imports ms "
                  "| numpy | pytest | OTel SDK |",
                  "|---|---:|---:|---:|---:|---:|---:|:-:|:-:|:-:|"]
        for name, row in run["commands"].items():
            loaded = row["loaded"]
            target = "—" if row["target_s"] is None else f"{row['target_s']:.2f}"
            lines.append(
                f"| {name} | {row['median_s']:.3f} | {row['min_s']:.3f} | {row['p90_s']:.3f} "
                f"| {target} | {row['modules']} | {row['import_ms']} "
                f"| {'yes' if loaded['numpy'] else 'no'} | {'yes' if loaded['pytest'] else 'no'}"
                f" | {'yes' if loaded['opentelemetry.sdk'] else 'no'} |")
        lines.append("")
        lines.append("Slowest top-level imports (ms, under `-X importtime`):")
        lines.append("")
        for name, row in run["commands"].items():
            slow = ", ".join(f"{s['module']} {s['ms']}" for s in row["slowest"][:5])
            lines.append(f"- {name}: {slow}")
        lines.append("")
    lines += ["Reproduce: `python bench/cli_startup.py --label after` (from the project's "
              "venv, after `pip install -e .`).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--label", default="after",
                        help="name of this run in the results (an earlier one is kept)")
    args = parser.parse_args()
    run = measure(args.samples)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "cli_startup.json"
    all_runs: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    all_runs[args.label] = run
    path.write_text(json.dumps(all_runs, indent=2) + "\n")
    (RESULTS / "cli_startup.md").write_text(render(all_runs))
    for name, row in run["commands"].items():
        print(f"{name:<8} median {row['median_s']:.3f} s  min {row['min_s']:.3f} s  "
              f"{row['modules']} modules  numpy={row['loaded']['numpy']}")


if __name__ == "__main__":
    main()
