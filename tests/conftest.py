"""Project-wide test fixtures."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["governed_memory_conformance.plugin", "pytester"]

settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile("ci", max_examples=100, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# The long runs behind the `slow` marker use this profile: 10,000 examples.
settings.register_profile("thorough", max_examples=10_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else
                                     "default"))
