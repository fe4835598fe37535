"""A profile's ``[stores.<name>]`` built by the factory a plugin registered for its
``kind``, the one way every such store is made (an embedder, a language model, …).

Each store reads the same way: the kind is looked up in its registry, the factory is
handed a plain, mutable copy of the frozen config, and what it returns must be what the
store is for. A problem names its profile path (``stores.embedder.kind: ...``), so a
typo stops start-up at the line that holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import Registration
from governed_memory.profiles.spec import MemoryProfileSpec

__all__ = ["build_store", "plain_config"]

S = TypeVar("S")


def build_store(spec: MemoryProfileSpec, name: str,
                lookup: Callable[[str], Registration[Callable[..., S]]],
                kind: type, what: str) -> S | None:
    """The store ``[stores.<name>]`` names, built by its registered factory and checked
    to be a ``kind`` (a factory is plugin code: its annotation is no proof); ``None``
    when the profile names none."""
    store = spec.stores.get(name)
    if store is None:
        return None
    path = f"stores.{name}"
    try:
        registration = lookup(store.kind)
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(f"{path}.kind: {exc}") from None
    try:
        built = registration.factory(plain_config(store.config))
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(f"{path}.config: {exc}") from None
    if not isinstance(built, kind):
        raise MemoryConfigurationError(
            f"{path}: the factory of {store.kind!r} built no {what}")
    return built


def plain_config(value: Mapping[str, Any]) -> dict[str, Any]:
    """A mutable plain copy of a frozen profile config, as factories expect."""

    def plain(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {str(k): plain(v) for k, v in item.items()}
        if isinstance(item, tuple | list):
            return [plain(v) for v in item]
        return item

    return {str(k): plain(v) for k, v in value.items()}
