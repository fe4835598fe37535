"""Registers every ``*.toml`` profile in this package and the ``support-desk`` pack."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from importlib.resources.abc import Traversable

from governed_memory import hookimpl
from governed_memory.profiles.packs import DomainPack

SUPPORT_DESK = DomainPack(
    "support-desk", "1.0.0",
    {"chat": "chat-assistant@1.0.0", "agent": "agent-run@1.0.0"},
    description="A customer-support product: assistant chats and agent runs.",
)


def profile_files() -> list[Traversable]:
    """The packaged profile files, in a stable order."""
    package = files("governed_memory_profiles")
    return sorted((entry for entry in package.iterdir() if entry.name.endswith(".toml")),
                  key=lambda entry: entry.name)


@hookimpl
def register_memory_profiles(register: Callable[..., None]) -> None:
    for resource in profile_files():
        register(resource)


@hookimpl
def register_domain_packs(register: Callable[..., None]) -> None:
    register(SUPPORT_DESK)
