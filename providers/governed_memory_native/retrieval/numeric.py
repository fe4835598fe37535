"""numpy, imported when a vector is first handled rather than when the provider is.

A provider without an embedder ranks lexically and never touches a vector, so its
processes (one CLI ``add``, a lexical search) should not spend ~50 ms importing numpy,
nor need it installed: numpy is the ``vectors`` extra (the ``embeddings`` and ``ann``
extras bring it too). The vector modules bind ``np`` to :func:`deferred`'s stand-in,
which replaces itself in the module's namespace with numpy on first attribute access,
so later lookups cost what a plain ``import numpy as np`` costs.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from types import ModuleType
from typing import Any, Final

from governed_memory.errors import MemoryConfigurationError

EXTRA_HINT: Final = "pip install 'governed-memory[vectors]'"


def require_numpy() -> ModuleType:
    """numpy, or a configuration error naming the extra that brings it."""
    try:
        import numpy
    except ImportError:
        raise MemoryConfigurationError(
            f"vector search (an embedder in the profile's [stores.embedder]) needs numpy, "
            f"which is not installed: {EXTRA_HINT}") from None
    return numpy


class _DeferredNumpy:
    """Stands for numpy in one module until first used, then puts numpy in its place."""

    __slots__ = ("_name", "_namespace")

    def __init__(self, namespace: MutableMapping[str, Any], name: str) -> None:
        self._namespace = namespace
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module = require_numpy()
        self._namespace[self._name] = module
        return getattr(module, attribute)


def deferred(namespace: MutableMapping[str, Any], name: str = "np") -> Any:
    """The stand-in for ``import numpy as <name>`` in the module whose ``globals()``
    is ``namespace``."""
    return _DeferredNumpy(namespace, name)
