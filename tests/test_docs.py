"""Every ```python example in the README and docs/ runs as written."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def examples() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for index, block in enumerate(FENCE.findall(path.read_text(encoding="utf-8"))):
            found.append((f"{path.name}[{index}]", block))
    return found


# Fragments that only show a signature (no asyncio.run, no __main__ guard) are not whole
# programs.
RUNNABLE = [(name, code) for name, code in examples()
            if "asyncio.run(" in code or 'if __name__ == "__main__":' in code]


def test_the_docs_have_runnable_examples() -> None:
    assert len(RUNNABLE) >= 3


@pytest.mark.parametrize(("name", "code"), RUNNABLE, ids=[n for n, _ in RUNNABLE])
def test_example_runs(name: str, code: str, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    runpy.run_path(str(script), run_name="__main__")
