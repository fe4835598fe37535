"""``governed-memory conformance`` without what it needs: without pytest or hypothesis
(the ``conformance`` extra) it names the extra and stops; with a provider whose own
extra is missing it stops at the first configuration error and prints it once, instead
of failing every test with the same message. Each case runs in a child process where
the missing package cannot be imported."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import BLOCK_IMPORTS, python

RUN = ("from governed_memory.cli.main import main\n"
       "sys.argv = ['governed-memory', *sys.argv[1:]]\n"
       "main()\n")


@pytest.mark.parametrize("missing", ["pytest", "hypothesis"])
def test_without_the_extra_it_names_the_extra_and_stops(missing: str,
                                                        tmp_path: Path) -> None:
    done = python(BLOCK_IMPORTS.format(names=[missing]) + RUN, "conformance", "--provider",
                  "native", cwd=tmp_path)
    assert done.returncode == 7, done.stderr
    assert "pip install 'governed-memory[conformance]'" in done.stderr
    assert f"{missing} is not installed" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert done.stdout == ""


def test_a_provider_missing_its_extra_stops_at_the_first_test(tmp_path: Path) -> None:
    pytest.importorskip("governed_memory_mem0")
    done = python(BLOCK_IMPORTS.format(names=["mem0"]) + RUN, "conformance", "--provider",
                  "mem0", cwd=tmp_path)
    assert done.returncode == 7, done.stdout[-3000:] + done.stderr[-3000:]
    assert "pip install 'governed-memory[mem0]'" in done.stderr
    assert "stopped at its first test" in done.stderr
    output = done.stdout + done.stderr
    assert output.count("governed-memory[mem0]") <= 3  # once in the traceback, once said
    assert len(output.splitlines()) < 80
    assert "FAIL" not in done.stdout.splitlines()[-1:]


def test_the_conformance_package_says_which_extra_it_needs(tmp_path: Path) -> None:
    done = python(BLOCK_IMPORTS.format(names=["hypothesis"])
                  + "import governed_memory_conformance\n", cwd=tmp_path)
    assert done.returncode == 1
    assert "pip install 'governed-memory[conformance]'" in done.stderr
