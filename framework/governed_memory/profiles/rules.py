"""The rules a profile sets on what is written and who may do what: the sections the
built-in policies enforce (scope, write, retention, privacy, access, quotas), and which
policies run.

A rule here has effect only through its policy; ``MemoryProfileSpec`` refuses a profile
that sets one without enabling the policy that enforces it, so that no setting is
silently ignored.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping
from typing import Any, Final

import attrs

from governed_memory.dedup import DedupMode
from governed_memory.operations import Operation
from governed_memory.principal import Permission
from governed_memory.profiles.problems import (
    ProfileProblem,
    check_at_least_one,
    check_positive,
    check_unique,
    checked_config,
    frozen_dict,
)
from governed_memory.records import MemoryType
from governed_memory.scope import DIMENSIONS


@attrs.frozen(slots=True)
class ScopeSection:
    """Dimensions every new memory must be written with (``tenant_id`` always is)."""

    required: tuple[str, ...] = ("tenant_id",)

    def __attrs_post_init__(self) -> None:
        for index, name in enumerate(self.required):
            if name not in DIMENSIONS:
                raise ProfileProblem(f"required[{index}]",
                                     f"{name!r} is not a scope dimension "
                                     f"({', '.join(DIMENSIONS)})")
        check_unique("required", self.required)


@attrs.frozen(slots=True)
class WriteSection:
    dedup: DedupMode = DedupMode.OFF
    similarity_threshold: float = 0.95
    """With ``dedup = "similarity"``: how similar (0-1, the embedder's cosine) a live
    record must be to count as the same memory."""
    require_idempotency_key: bool = False
    review_source_types: tuple[str, ...] = ()
    """Provenance source types whose new memories wait for ``approve`` or ``reject``."""
    read_only: bool = False
    allowed_memory_types: tuple[MemoryType, ...] = ()
    """Empty means every type."""

    def __attrs_post_init__(self) -> None:
        for index, source in enumerate(self.review_source_types):
            if not source or source != source.strip():
                raise ProfileProblem(f"review_source_types[{index}]",
                                     "must be a non-empty source type")
        check_unique("review_source_types", self.review_source_types)
        check_unique("allowed_memory_types", self.allowed_memory_types)
        threshold = self.similarity_threshold
        if isinstance(threshold, bool) or not 0 < threshold <= 1:
            raise ProfileProblem("similarity_threshold", "must be a number in (0, 1]")


@attrs.frozen(slots=True)
class RetentionSection:
    """How long memories live. A write never lives past ``max_ttl_s``."""

    default_ttl_s: float | None = None
    max_ttl_s: float | None = None
    ttl_by_type: Mapping[MemoryType, float] = attrs.field(factory=dict, converter=frozen_dict)

    def __attrs_post_init__(self) -> None:
        check_positive("default_ttl_s", self.default_ttl_s)
        check_positive("max_ttl_s", self.max_ttl_s)
        for memory_type, ttl in self.ttl_by_type.items():
            check_positive(f"ttl_by_type.{memory_type.value}", ttl)
        if self.max_ttl_s is None:
            return
        if self.default_ttl_s is not None and self.default_ttl_s > self.max_ttl_s:
            raise ProfileProblem("default_ttl_s", f"{self.default_ttl_s} is above max_ttl_s "
                                                  f"({self.max_ttl_s})")
        for memory_type, ttl in self.ttl_by_type.items():
            if ttl > self.max_ttl_s:
                raise ProfileProblem(f"ttl_by_type.{memory_type.value}",
                                     f"{ttl} is above max_ttl_s ({self.max_ttl_s})")

    def ttl_for(self, memory_type: MemoryType) -> float | None:
        """The lifetime a new memory of this type gets when the caller sets none."""
        ttl = self.ttl_by_type.get(memory_type, self.default_ttl_s)
        return ttl if ttl is not None else self.max_ttl_s

    @property
    def configured(self) -> bool:
        return bool(self.default_ttl_s or self.max_ttl_s or self.ttl_by_type)


class SecretGuardMode(enum.StrEnum):
    OFF = "off"
    REJECT = "reject"
    REDACT = "redact"


class PiiKind(enum.StrEnum):
    """What ``pii-redaction`` can find (the detectors live in the policies package;
    docs/domain-packs.md says what each matches and how it is validated)."""

    EMAIL = "email"
    PHONE = "phone"
    PAYMENT_CARD = "payment_card"
    IBAN = "iban"
    SSN = "ssn"
    IPV4 = "ipv4"
    IPV6 = "ipv6"


class EventDetail(enum.StrEnum):
    """``minimal`` leaves content hashes out of events: the hash of a short memory
    ("prefers decaf") can be found by hashing guesses."""

    STANDARD = "standard"
    MINIMAL = "minimal"


@attrs.frozen(slots=True)
class PrivacySection:
    secret_guard: SecretGuardMode = SecretGuardMode.OFF
    pii_redaction: bool = False
    pii_kinds: tuple[PiiKind, ...] = (PiiKind.EMAIL, PiiKind.PHONE)
    event_detail: EventDetail = EventDetail.STANDARD
    capture_content_in_traces: bool = False
    """Opt in to content and query text as span attributes (after redaction policies
    ran), for debugging a deployment whose traces are as protected as its data. Events,
    metrics and logs never carry content, whatever this says."""

    def __attrs_post_init__(self) -> None:
        if not self.pii_kinds:
            raise ProfileProblem("pii_kinds", "list at least one kind (or turn "
                                              "pii_redaction off)")
        check_unique("pii_kinds", self.pii_kinds)


@attrs.frozen(slots=True)
class AccessSection:
    """Per-operation permissions demanded on top of the fixed scope rule (which
    already demands each operation's own permission)."""

    permissions: Mapping[Operation, Permission] = attrs.field(factory=dict,
                                                              converter=frozen_dict)


RATE_STORE_PROVIDER: Final = "provider"
RATE_STORE_PROCESS: Final = "process"
BUILT_IN_RATE_STORES: Final = frozenset({RATE_STORE_PROVIDER, RATE_STORE_PROCESS})
_LIMITS: Final = ("max_records_per_tenant", "max_records_per_scope", "max_bytes_per_tenant",
                  "max_bytes_per_scope", "writes_per_minute_per_tenant",
                  "writes_per_minute_per_scope")


@attrs.frozen(slots=True)
class QuotaSection:
    max_records_per_tenant: int | None = None
    max_records_per_scope: int | None = None
    max_bytes_per_tenant: int | None = None
    max_bytes_per_scope: int | None = None
    writes_per_minute_per_tenant: int | None = None
    writes_per_minute_per_scope: int | None = None
    rate_store: str = RATE_STORE_PROVIDER
    """Where the writes-per-minute windows are counted: ``"provider"`` (the provider's
    own, kept in its storage; windows in this process, with a warning, if it keeps
    none), ``"process"`` (this process only: N processes admit up to N times a limit)
    or the name of a registered rate store (``"redis"``), configured by
    ``[stores.rates]``."""

    def __attrs_post_init__(self) -> None:
        for name in _LIMITS:
            check_at_least_one(name, getattr(self, name))
        if not isinstance(self.rate_store, str) or not self.rate_store.strip():
            raise ProfileProblem("rate_store", "must name where write rates are counted "
                                 "(\"provider\", \"process\" or a registered rate store)")
        if self.rate_store != RATE_STORE_PROVIDER and not self.limits_rates:
            raise ProfileProblem("rate_store", f"is {self.rate_store!r}, but no "
                                 "writes_per_minute_per_tenant or writes_per_minute_per_scope "
                                 "limit counts there")

    @property
    def configured(self) -> bool:
        return any(getattr(self, name) is not None for name in _LIMITS)

    @property
    def limits_rates(self) -> bool:
        """A writes-per-minute limit is set (what ``rate_store`` is for)."""
        return (self.writes_per_minute_per_tenant is not None
                or self.writes_per_minute_per_scope is not None)

    @property
    def registered_rate_store(self) -> str | None:
        """The registered store ``rate_store`` names; ``None`` for the built-in choices."""
        return None if self.rate_store in BUILT_IN_RATE_STORES else self.rate_store

    @property
    def needs_usage(self) -> bool:
        """Record and byte limits need the provider to report usage."""
        return any(v is not None for v in (self.max_records_per_tenant,
                                           self.max_records_per_scope,
                                           self.max_bytes_per_tenant, self.max_bytes_per_scope))


def _frozen_configs(value: Mapping[str, Mapping[str, Any]] | None
                    ) -> Mapping[str, Mapping[str, Any]]:
    return types.MappingProxyType({name: checked_config(config, f"extra.{name}")
                                   for name, config in (value or {}).items()})


@attrs.frozen(slots=True)
class PoliciesSection:
    """Which policy plugins run, in order; ``extra`` configures third-party ones by name
    (built-in policies read their own sections of the profile instead)."""

    enabled: tuple[str, ...] = ()
    extra: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict,
                                                         converter=_frozen_configs)

    def __attrs_post_init__(self) -> None:
        for index, name in enumerate(self.enabled):
            if not name:
                raise ProfileProblem(f"enabled[{index}]", "must name a registered policy")
        check_unique("enabled", self.enabled)
        for name in self.extra:
            if name not in self.enabled:
                raise ProfileProblem(f"extra.{name}", "configures a policy that is not "
                                                      "in enabled")
