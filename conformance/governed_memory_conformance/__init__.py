"""governed-memory's provider conformance suite.

A provider's test module subclasses :class:`ProviderConformance` and implements
``async def make_provider(self, clock)``; a store's subclasses
:class:`TurnStoreConformance`, :class:`WorkingStateStoreConformance`,
:class:`BlockStoreConformance` or :class:`CacheStoreConformance` and implements
``async def make_store(self, clock)``.
The project's root ``conftest.py`` opts in with
``pytest_plugins = ["governed_memory_conformance.plugin"]``.

pytest and hypothesis are the ``conformance`` extra (``pip install
'governed-memory[conformance]'``), not dependencies of the library.
"""

try:
    import hypothesis  # noqa: F401
    import pytest
except ImportError as missing:  # pragma: no cover - the extra is missing
    raise ImportError(
        f"the governed-memory conformance suite needs the conformance extra "
        f"({missing.name} is not installed): pip install 'governed-memory[conformance]'"
    ) from missing

# Before importing them: assertion messages in the helpers are half the diagnosis.
pytest.register_assert_rewrite(
    "governed_memory_conformance.base",
    "governed_memory_conformance.harness",
    "governed_memory_conformance.model",
    "governed_memory_conformance.suite",
    "governed_memory_conformance.stores",
)

from governed_memory_conformance.base import scenario  # noqa: E402
from governed_memory_conformance.capabilities import (  # noqa: E402
    CAPABILITY_NAMES,
    capabilities_of,
    requires,
)
from governed_memory_conformance.guard import expected_failure  # noqa: E402
from governed_memory_conformance.harness import Harness, expect_error  # noqa: E402
from governed_memory_conformance.settings import ConformanceSettings  # noqa: E402
from governed_memory_conformance.stores import (  # noqa: E402
    BlockStoreConformance,
    CacheStoreConformance,
    TurnStoreConformance,
    WorkingStateStoreConformance,
)
from governed_memory_conformance.suite import ProviderConformance  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "CAPABILITY_NAMES",
    "BlockStoreConformance",
    "CacheStoreConformance",
    "ConformanceSettings",
    "Harness",
    "ProviderConformance",
    "TurnStoreConformance",
    "WorkingStateStoreConformance",
    "__version__",
    "capabilities_of",
    "expect_error",
    "expected_failure",
    "requires",
    "scenario",
]
