"""``MemoryProfileSpec``: everything a deployment decides about memory, as one value.

A profile is referenced as ``id@version`` and pinned by its ``revision`` (the hash of
its canonical form), which goes into every event: an auditor can tell exactly which
rules governed an operation. Each section is a frozen attrs class that checks itself,
so a spec built in code is held to the same rules as one loaded from TOML; a broken
rule raises ``ProfileProblem`` naming the dotted path of the offending setting.

Some sections are enforced today (by the built-in policies and the manager, which
reads ``provider``, ``timeout_s``, ``retrieval.top_k`` and ``privacy.event_detail``); cache,
indexing, fallback, stores and context are declarations for the components that read
them, validated now so a profile written today keeps meaning the same thing.

The sections live beside this module, grouped by what they decide (``storage``,
``retrieval``, ``rules``, ``auth``, ``audit``; the refusals in ``problems``). This module
holds what needs the whole profile: the rules that tie one section to another, and the
revision. Every section is importable from here too, as it always was.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.converter import unstructure
from governed_memory.dedup import DedupMode
from governed_memory.operation_context import ProfileRef
from governed_memory.profiles.audit import AUDIT_SINK, AuditSection, FsyncPolicy
from governed_memory.profiles.auth import (
    JWT_ALGORITHMS,
    AuthSection,
    JwtClaimsSection,
    JwtSection,
)
from governed_memory.profiles.blocks import BlockSection, block_problems
from governed_memory.profiles.problems import (
    ProfileProblem,
    ProfileProblems,
    check_positive,
    frozen_dict,
)
from governed_memory.profiles.retrieval import (
    SIGNALS,
    ContextSection,
    RequestRankingSection,
    RetrievalMode,
    RetrievalSection,
    SnapshotStorage,
    context_budget_problems,
)
from governed_memory.profiles.rules import (
    BUILT_IN_RATE_STORES,
    RATE_STORE_PROCESS,
    RATE_STORE_PROVIDER,
    AccessSection,
    EventDetail,
    PiiKind,
    PoliciesSection,
    PrivacySection,
    QuotaSection,
    RetentionSection,
    ScopeSection,
    SecretGuardMode,
    WriteSection,
)
from governed_memory.profiles.storage import (
    STORE_NAMES,
    CacheSection,
    CacheStore,
    FallbackSection,
    IndexingMode,
    IndexingSection,
    ProviderSection,
    StoreSection,
)
from governed_memory.profiles.versions import is_name, is_semver

CURRENT_SPEC_VERSION: Final = 1
REVISION_PREFIX: Final = "sha256:"


# Settings that only mean something if a built-in policy enforces them. A profile that
# asks for one without enabling its policy would silently not get it, so that is an error.
_ENFORCED_BY: Final[tuple[tuple[str, str], ...]] = (
    ("privacy.secret_guard", "secret-guard"),
    ("privacy.pii_redaction", "pii-redaction"),
    ("retention", "retention"),
    ("write.review_source_types", "write-review"),
    ("write.read_only", "write-rules"),
    ("write.allowed_memory_types", "write-rules"),
    ("write.require_idempotency_key", "write-rules"),
    ("scope.required", "write-rules"),
    ("access.permissions", "permissions"),
    ("quotas", "quotas"),
)
"""(setting, the policy that enforces it): asking for the setting without enabling its
policy would be a setting without effect, so the profile is refused."""

_ASKS: Final[dict[str, Callable[[MemoryProfileSpec], bool]]] = {
    "privacy.secret_guard": lambda s: s.privacy.secret_guard is not SecretGuardMode.OFF,
    "privacy.pii_redaction": lambda s: s.privacy.pii_redaction,
    "retention": lambda s: s.retention.configured,
    "write.review_source_types": lambda s: bool(s.write.review_source_types),
    "write.read_only": lambda s: s.write.read_only,
    "write.allowed_memory_types": lambda s: bool(s.write.allowed_memory_types),
    "write.require_idempotency_key": lambda s: s.write.require_idempotency_key,
    "scope.required": lambda s: set(s.scope.required) - {"tenant_id"} != set(),
    "access.permissions": lambda s: bool(s.access.permissions),
    "quotas": lambda s: s.quotas.configured,
}


def enforcement_problems(asks: Callable[[str], bool],
                         enabled: Iterable[object]) -> list[ProfileProblem]:
    """A problem for each setting asked for whose policy is not enabled. ``asks`` says
    whether the profile sets a path: from a built spec, or (when some section could
    not even be built) from the raw table, so one broken section hides nothing else."""
    on = set(enabled)
    return [ProfileProblem(path, f"is enforced by policy {policy!r}, which is not in "
                                 "policies.enabled")
            for path, policy in _ENFORCED_BY if policy not in on and asks(path)]


@attrs.frozen(slots=True)
class MemoryProfileSpec:
    """A versioned profile. ``revision`` is derived from every other field."""

    id: str
    version: str
    spec_version: int = CURRENT_SPEC_VERSION
    description: str = ""
    timeout_s: float | None = 30.0
    """The provider call's deadline; ``None`` waits for ever."""
    provider: ProviderSection = attrs.field(factory=ProviderSection)
    stores: Mapping[str, StoreSection] = attrs.field(factory=dict, converter=frozen_dict)
    scope: ScopeSection = attrs.field(factory=ScopeSection)
    retrieval: RetrievalSection = attrs.field(factory=RetrievalSection)
    write: WriteSection = attrs.field(factory=WriteSection)
    retention: RetentionSection = attrs.field(factory=RetentionSection)
    privacy: PrivacySection = attrs.field(factory=PrivacySection)
    access: AccessSection = attrs.field(factory=AccessSection)
    quotas: QuotaSection = attrs.field(factory=QuotaSection)
    indexing: IndexingSection = attrs.field(factory=IndexingSection)
    cache: CacheSection = attrs.field(factory=CacheSection)
    fallback: FallbackSection = attrs.field(factory=FallbackSection)
    context: ContextSection = attrs.field(factory=ContextSection)
    blocks: Mapping[str, BlockSection] = attrs.field(factory=dict, converter=frozen_dict)
    """The memory blocks agents edit (``[blocks.<name>]``), in declaration order."""
    auth: AuthSection = attrs.field(factory=AuthSection)
    audit: AuditSection = attrs.field(factory=AuditSection)
    policies: PoliciesSection = attrs.field(factory=PoliciesSection)
    _revision: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if not is_name(self.id):
            raise ProfileProblem("id", f"{self.id!r} is not a profile id (lowercase letters, "
                                       "digits, '.', '_', '-')")
        if not is_semver(self.version):
            raise ProfileProblem("version", f"{self.version!r} is not a semantic version "
                                            "(MAJOR.MINOR.PATCH)")
        if self.spec_version < 1 or self.spec_version > CURRENT_SPEC_VERSION:
            raise ProfileProblem("spec_version", f"{self.spec_version} is not a known schema "
                                                 f"version (1..{CURRENT_SPEC_VERSION})")
        check_positive("timeout_s", self.timeout_s)
        found = self._store_problems()
        found.extend(block_problems(self.blocks, "blocks" in self.stores))
        found.extend(context_budget_problems(
            self.context.total_budget_tokens,
            {name: block.limit for name, block in self.blocks.items()}))
        if (self.fallback.provider == self.provider.name
                and self.fallback.config == self.provider.config):
            # The same provider elsewhere (a replica) is a fallback; the very same one
            # is not.
            found.append(ProfileProblem("fallback.provider",
                                        "falls back to the primary provider"))
        found.extend(enforcement_problems(lambda path: _ASKS[path](self),
                                          self.policies.enabled))
        if self.write.dedup is DedupMode.SIMILARITY and (
                "embedder" not in self.stores or self.indexing.mode is not IndexingMode.SYNC):
            # The new memory's vector must exist before its write to be compared.
            found.append(ProfileProblem("write.dedup", "\"similarity\" needs an embedder "
                                        "([stores.embedder]) and [indexing] mode = \"sync\""))
        if len(found) == 1:
            raise found[0]
        if found:
            raise ProfileProblems(found)
        object.__setattr__(self, "_revision", _revision_of(self))

    def _store_problems(self) -> list[ProfileProblem]:
        """Every named store is read by something, and by what it says it is."""
        found = [ProfileProblem(f"stores.{name}", "is no store a profile can name (one of "
                                f"{', '.join(sorted(STORE_NAMES))})")
                 for name in self.stores if name not in STORE_NAMES]
        cache = self.stores.get("cache")
        if cache is not None:
            if not self.cache.enabled or self.cache.store is CacheStore.MEMORY:
                found.append(ProfileProblem(
                    "stores.cache", "names a cache store, but [cache] does not use one (it "
                    "needs enabled = true and a store other than \"memory\")"))
            elif cache.kind != self.cache.store.value:
                found.append(ProfileProblem("stores.cache.kind", f"is {cache.kind!r}, but "
                                            f"[cache] store is {self.cache.store.value!r}"))
        rates = self.stores.get("rates")
        registered = self.quotas.registered_rate_store
        if rates is not None:
            if registered is None:
                found.append(ProfileProblem(
                    "stores.rates", "configures a rate store, but [quotas] rate_store is "
                    f"{self.quotas.rate_store!r} (it needs the name of a registered rate "
                    "store, such as \"redis\")"))
            elif rates.kind != registered:
                found.append(ProfileProblem("stores.rates.kind", f"is {rates.kind!r}, but "
                                            f"[quotas] rate_store is {registered!r}"))
        return found

    @property
    def revision(self) -> str:
        """``sha256:`` + the hash of the canonical JSON of every other field."""
        return self._revision

    @property
    def key(self) -> str:
        return f"{self.id}@{self.version}"

    @property
    def ref(self) -> ProfileRef:
        """What events and spans carry."""
        return ProfileRef(self.id, self.version, self.revision)

    def canonical(self) -> dict[str, Any]:
        """The unstructured form that the revision hashes (the framework's converter:
        structuring it again gives an equal spec)."""
        data: dict[str, Any] = unstructure(self)
        return data


_LATER_SECTIONS: Final[Mapping[tuple[str, ...], Any]] = {
    ("auth",): AuthSection(),
    ("blocks",): {},
    ("retrieval", "request_ranking"): RequestRankingSection(),
    ("quotas", "rate_store"): RATE_STORE_PROVIDER,
    ("context", "total_budget_tokens"): None,
    ("context", "exclude_sensitivity"): (),
}
"""Sections added after profiles were published: hashed only when set away from their
default, so every earlier profile keeps the revision its events and packs recorded."""


def _revision_of(spec: MemoryProfileSpec) -> str:
    data = spec.canonical()
    for path, default in _LATER_SECTIONS.items():
        value: Any = spec
        for name in path:
            value = getattr(value, name)
        if value == default:
            table = data
            for name in path[:-1]:
                table = table[name]
            del table[path[-1]]
    text = canonical_json(data)
    return REVISION_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


__all__ = [
    "AUDIT_SINK",
    "BUILT_IN_RATE_STORES",
    "CURRENT_SPEC_VERSION",
    "JWT_ALGORITHMS",
    "RATE_STORE_PROCESS",
    "RATE_STORE_PROVIDER",
    "REVISION_PREFIX",
    "SIGNALS",
    "STORE_NAMES",
    "AccessSection",
    "AuditSection",
    "AuthSection",
    "CacheSection",
    "CacheStore",
    "ContextSection",
    "EventDetail",
    "FallbackSection",
    "FsyncPolicy",
    "IndexingMode",
    "IndexingSection",
    "JwtClaimsSection",
    "JwtSection",
    "MemoryProfileSpec",
    "PiiKind",
    "PoliciesSection",
    "PrivacySection",
    "ProfileProblem",
    "ProfileProblems",
    "ProviderSection",
    "QuotaSection",
    "RequestRankingSection",
    "RetentionSection",
    "RetrievalMode",
    "RetrievalSection",
    "ScopeSection",
    "SecretGuardMode",
    "SnapshotStorage",
    "StoreSection",
    "WriteSection",
    "enforcement_problems",
]
