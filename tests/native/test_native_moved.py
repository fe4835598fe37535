"""Every module path the native package had before its rooms still imports, as the same
module object (with a warning naming the new home), as the provider changelog promises."""

from __future__ import annotations

import importlib
import warnings

import pytest
from governed_memory_native.moved import MOVED, PACKAGE


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_module_path_is_the_new_module(old: str, new: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = importlib.import_module(f"{PACKAGE}.{old}")
    assert before is importlib.import_module(f"{PACKAGE}.{new}")
    assert before.__spec__ is not None and before.__spec__.name == f"{PACKAGE}.{new}"
    if caught:  # only the first import of a name warns; later ones are cached
        assert f"{PACKAGE}.{new}" in str(caught[0].message)


def test_the_old_fusion_module_names_are_answered_by_the_retrieval_package() -> None:
    with pytest.warns(DeprecationWarning, match="retrieval.fusion"):
        from governed_memory_native.retrieval import fuse
    from governed_memory_native.retrieval.fusion import fuse as current
    assert fuse is current
    with pytest.raises(ImportError):
        from governed_memory_native.retrieval import no_such_name  # noqa: F401
