"""Lazy package exports (PEP 562), one implementation for every package that has them.

A plugin package is imported by every plugin load, and ``governed_memory`` by every
command, so their ``__init__`` must not import what their names need (the manager,
numpy, the mem0 library) until a name is asked for. ``lazy_exports`` returns the
module-level ``__getattr__`` and ``__dir__``: the first lookup of a name imports its
module and stores the value in the package, so later lookups are ordinary attributes.
This module imports nothing but the standard library.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__, __dir__ = lazy_exports(__name__, {"Name": "module", ...})``;
    a module without a dot is taken inside ``package``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = home if "." in home else f"{package}.{home}"
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *homes})

    return __getattr__, __dir__
