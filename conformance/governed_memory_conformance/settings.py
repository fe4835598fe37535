"""How hard the suite pushes: example counts and time bounds, set per provider class.

The defaults keep a full run over a fast provider well under a minute so it can gate
every commit; a provider with a slow datastore lowers them, and a release run raises
them (or requests the thorough variants, which run ``thorough_examples``).
"""

from __future__ import annotations

import attrs


def _positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} must be a positive integer, got {value!r}")


@attrs.frozen(slots=True)
class ConformanceSettings:
    """Knobs a provider's test class sets as ``conformance_settings = ConformanceSettings(...)``.

    Every count is a floor the provider must pass, never a ceiling it may hide behind:
    the guard refuses a subclass that weakens a suite test, and these only size the
    generated workload.
    """

    isolation_examples: int = attrs.field(default=25, validator=_positive)
    """Hypothesis examples of the scope-isolation property (a fresh provider each)."""

    machine_examples: int = attrs.field(default=25, validator=_positive)
    """State-machine runs, each on a fresh provider."""

    machine_steps: int = attrs.field(default=30, validator=_positive)
    """Upper bound on rules per state-machine run."""

    thorough_examples: int = attrs.field(default=10_000, validator=_positive)
    """Examples for the ``slow`` thorough variants of the two properties above."""

    concurrent_writers: int = attrs.field(default=20, validator=_positive)
    """Tasks racing compare-and-set updates on one record."""

    scenario_timeout: float = 120.0
    """Seconds one test may take before it fails as hung, so a deadlock cannot stall CI."""

    shrink: bool = True
    """Shrink a failing example to a minimal one. Turning it off fails much faster (a
    broken provider's state machine can take a minute to shrink) at the price of a
    longer, noisier counterexample."""

    use_hypothesis_database: bool = True
    """Keep failing examples in ``.hypothesis/`` to replay them; off for throwaway runs."""
