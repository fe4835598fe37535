"""Versioned profiles and domain packs: the model, TOML loading, registries, building.

``MemoryProfileSpec`` is the model; ``load_profile`` / ``loads_profile`` /
``parse_profile`` read it (strictly, naming the path of every problem);
``ProfileRegistry`` and ``PackRegistry`` hold what plugins registered;
``resolve_profile`` turns what a caller names (a registered ``id@version`` or a TOML
file) into a spec, the one rule every entry point follows; and
``GovernedMemoryManager.from_profile`` / ``from_pack`` build a manager from them.

The names below are imported on first use (PEP 562): the model (``profiles.spec``) is
imported by modules the building imports in turn (``sinks``), and an eager package
would make importing any one of them first a loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.exports import lazy_exports

if TYPE_CHECKING:
    from governed_memory.dedup import DedupMode
    from governed_memory.profiles.build import check_against_plugins
    from governed_memory.profiles.convert import (
        ProfileLoadError,
        structure_profile,
        unstructure_profile,
    )
    from governed_memory.profiles.loading import (
        READERS,
        load_profile,
        loads_profile,
        parse_profile,
    )
    from governed_memory.profiles.packs import (
        DomainPack,
        PackRegistry,
        ResolvedPack,
        dependency_hash,
    )
    from governed_memory.profiles.registry import ProfileRegistry, RegisteredProfile
    from governed_memory.profiles.resolve import (
        ProfileSource,
        ResolvedProfile,
        find_profile,
        resolve_profile,
    )
    from governed_memory.profiles.spec import (
        CURRENT_SPEC_VERSION,
        AccessSection,
        AuditSection,
        CacheSection,
        CacheStore,
        ContextSection,
        EventDetail,
        FallbackSection,
        IndexingMode,
        IndexingSection,
        MemoryProfileSpec,
        PiiKind,
        PoliciesSection,
        PrivacySection,
        ProfileProblem,
        ProviderSection,
        QuotaSection,
        RetentionSection,
        RetrievalMode,
        RetrievalSection,
        ScopeSection,
        SecretGuardMode,
        StoreSection,
        WriteSection,
    )
    from governed_memory.profiles.versions import Reference, SemVer

_HOMES = {
    "governed_memory.dedup": ("DedupMode",),
    "governed_memory.profiles.build": ("check_against_plugins",),
    "governed_memory.profiles.convert": ("ProfileLoadError", "structure_profile",
                                         "unstructure_profile"),
    "governed_memory.profiles.loading": ("READERS", "load_profile", "loads_profile",
                                         "parse_profile"),
    "governed_memory.profiles.packs": ("DomainPack", "PackRegistry", "ResolvedPack",
                                       "dependency_hash"),
    "governed_memory.profiles.registry": ("ProfileRegistry", "RegisteredProfile"),
    "governed_memory.profiles.resolve": ("ProfileSource", "ResolvedProfile", "find_profile",
                                         "resolve_profile"),
    "governed_memory.profiles.spec": ("CURRENT_SPEC_VERSION", "AccessSection", "AuditSection",
                                      "CacheSection", "CacheStore", "ContextSection",
                                      "EventDetail", "FallbackSection", "IndexingMode",
                                      "IndexingSection", "MemoryProfileSpec", "PiiKind",
                                      "PoliciesSection", "PrivacySection", "ProfileProblem",
                                      "ProviderSection", "QuotaSection", "RetentionSection",
                                      "RetrievalMode", "RetrievalSection", "ScopeSection",
                                      "SecretGuardMode", "StoreSection", "WriteSection"),
    "governed_memory.profiles.versions": ("Reference", "SemVer"),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)

__all__ = [
    "CURRENT_SPEC_VERSION",
    "READERS",
    "AccessSection",
    "AuditSection",
    "CacheSection",
    "CacheStore",
    "ContextSection",
    "DedupMode",
    "DomainPack",
    "EventDetail",
    "FallbackSection",
    "IndexingMode",
    "IndexingSection",
    "MemoryProfileSpec",
    "PackRegistry",
    "PiiKind",
    "PoliciesSection",
    "PrivacySection",
    "ProfileLoadError",
    "ProfileProblem",
    "ProfileRegistry",
    "ProfileSource",
    "ProviderSection",
    "QuotaSection",
    "Reference",
    "RegisteredProfile",
    "ResolvedPack",
    "ResolvedProfile",
    "RetentionSection",
    "RetrievalMode",
    "RetrievalSection",
    "ScopeSection",
    "SecretGuardMode",
    "SemVer",
    "StoreSection",
    "WriteSection",
    "check_against_plugins",
    "dependency_hash",
    "find_profile",
    "load_profile",
    "loads_profile",
    "parse_profile",
    "resolve_profile",
    "structure_profile",
    "unstructure_profile",
]
