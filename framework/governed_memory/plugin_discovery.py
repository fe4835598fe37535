"""Where the ``governed_memory`` entry points are, read without ``importlib.metadata``.

Every command that opens memory loads plugins, and ``importlib.metadata`` costs about
10 ms to import (it pulls in ``email``, ``zipfile`` and ``csv``) before it scans every
distribution's metadata: a noticeable share of a 0.3 s command. An installed
distribution's entry points are a small INI file, ``<name>.dist-info/entry_points.txt``
(``.egg-info`` for older installs) in a directory on ``sys.path``, so this reads those
files directly, in ``sys.path`` order, the first distribution to name an entry point
winning (as pluggy's loader has it: it skips a name already registered).

Anything this reader does not handle (a zip or egg file on ``sys.path``) makes it
answer ``None``, and the caller falls back to pluggy's ``importlib.metadata`` loader.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

_METADATA_SUFFIXES = (".dist-info", ".egg-info")


def entry_points(group: str, path: Iterable[str] | None = None) -> list[tuple[str, str]] | None:
    """``(name, "module[:attribute]")`` of each entry point in ``group``, or ``None``
    when some ``sys.path`` entry is not a plain directory."""
    found: dict[str, str] = {}
    for entry in (sys.path if path is None else path):
        location = entry or os.getcwd()
        if not os.path.isdir(location):
            if os.path.exists(location):
                return None  # a zip or an egg file: importlib.metadata knows those
            continue
        try:
            names = sorted(os.listdir(location))
        except OSError:
            continue
        for name in names:
            if not name.endswith(_METADATA_SUFFIXES):
                continue
            for ep_name, value in _group(os.path.join(location, name, "entry_points.txt"),
                                         group):
                found.setdefault(ep_name, value)
    return list(found.items())


def _group(path: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of ``[group]`` in an ``entry_points.txt``."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    section = None
    pairs = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section != group or "=" not in line:
            continue
        name, _, value = line.partition("=")
        value = value.split("[", 1)[0].strip()  # "module:attr [extra]": extras are hints
        if name.strip() and value:
            pairs.append((name.strip(), value))
    return pairs


def load(value: str) -> object:
    """The object ``module[:attribute.path]`` names, imported."""
    import importlib

    module_name, _, attribute = value.partition(":")
    target: object = importlib.import_module(module_name.strip())
    for part in filter(None, attribute.strip().split(".")):
        target = getattr(target, part)
    return target
