"""``GovernanceSettings``: what a profile decides about running each operation, as one value.

A profile is read in many places, but governance needs only a handful of its answers
on every operation: which profile to name in events and spans, the deadline, how much
an event may say, whether content may reach a trace, what an identical add does and
whether an unrecorded operation may run at all. Reading them once, into one frozen
value, lets the manager, the activity port and the tier ports be handed that value
instead of each unpacking the profile (or a dozen loose parameters) on its own, and
lets a request apply what concerns it (:meth:`governed_memory.request.Request.governed`).
"""

from __future__ import annotations

import attrs

from governed_memory.dedup import DedupMode
from governed_memory.operation_context import ProfileRef
from governed_memory.profiles.spec import EventDetail, MemoryProfileSpec
from governed_memory.request_fields import check_similarity

DEFAULT_TIMEOUT_S = 30.0


def _similarity(settings: object, attribute: object, value: float) -> None:
    # Stamped on adds after their validation (``AddRequest.governed``): held to the same
    # rule here, so what governance sets is valid by construction.
    check_similarity(value)


@attrs.frozen(slots=True, kw_only=True)
class GovernanceSettings:
    """How governance runs an operation; the defaults are a manager's without a profile."""

    profile: ProfileRef = attrs.field(factory=ProfileRef)
    """The profile named in every event and span (id, version, revision)."""
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    """One deadline for the decision and the provider call together (``None``: none)."""
    fail_closed: bool = False
    """A profile's ``[audit] fail_closed``: refuse any operation whose ``requested``
    event the sinks cannot all record."""
    content_hashes_in_events: bool = True
    """``False`` (a profile's ``event_detail = "minimal"``): the hash of a short content
    can be reversed by guessing, so minimal trails leave it out."""
    capture_content: bool = False
    """A profile's ``privacy.capture_content_in_traces``: the (policy-transformed)
    content and query text go onto the span. Off by default, and never into events,
    metrics or logs."""
    dedup: DedupMode = DedupMode.OFF
    """A profile's ``[write] dedup``: stamped on every add the provider receives."""
    dedup_threshold: float = attrs.field(default=0.95, validator=_similarity)
    """With ``dedup = similarity``: the similarity at or above which it is a duplicate."""

    @classmethod
    def from_profile(cls, spec: MemoryProfileSpec) -> GovernanceSettings:
        """The settings ``spec`` decides (what ``GovernedMemoryManager.from_profile``
        runs with)."""
        return cls(profile=spec.ref, timeout_s=spec.timeout_s,
                   fail_closed=spec.audit.fail_closed,
                   content_hashes_in_events=spec.privacy.event_detail is not EventDetail.MINIMAL,
                   capture_content=spec.privacy.capture_content_in_traces,
                   dedup=spec.write.dedup, dedup_threshold=spec.write.similarity_threshold)

    @classmethod
    def of(cls, spec: MemoryProfileSpec | None, *, profile: ProfileRef | None = None,
           timeout_s: float | None = DEFAULT_TIMEOUT_S,
           fail_closed: bool | None = None) -> GovernanceSettings:
        """The settings a manager's keyword arguments describe: the profile's (if any),
        with the profile reference and fail-closed trail given overriding it, and the
        deadline given (the keyword's own, even beside a profile, as it always was)."""
        settings = cls() if spec is None else cls.from_profile(spec)
        return attrs.evolve(
            settings, profile=profile or settings.profile, timeout_s=timeout_s,
            fail_closed=settings.fail_closed if fail_closed is None else fail_closed)

